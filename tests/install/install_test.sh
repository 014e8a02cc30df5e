#!/usr/bin/env bash
# The library installed like a system library, and used as a partner would use it:
#
#   1. `make install DESTDIR=STAGE PREFIX=/usr/local` (a package build): the exact layout, modes,
#      link targets, the SONAME `readelf -d` shows, the pkg-config file; `make uninstall` leaves
#      nothing.
#   2. `make install PREFIX=PRIVATE` (a private prefix): C programs built through
#      `pkg-config --cflags --libs slotpartner` against the shared library (run through a run
#      path and through LD_LIBRARY_PATH; without either the loader cannot find it) and through
#      `pkg-config --static --cflags --libs slotpartner` against the static library (ldd: no
#      libslotpartner), each parsing a callback and answering it, compared with the C examples'
#      expected output.
#   3. `pip wheel ./bindings/python`: a platform wheel bundling the library, installed into a
#      fresh `python3 -m venv`, imported and used there without SLOTPARTNER_LIB.
#   4. The PHP package installed by Composer from a path repository, with the snippet of
#      bindings/php/README.md as it stands, offline; a script through Composer's autoloader
#      parses a callback (with the checkout's library, with the installed one, and through the
#      header of vendor/bin/slotpartner-preload-header under ffi.preload); the tool's arguments.
#   5. `make uninstall PREFIX=PRIVATE` leaves nothing.
#   6. `make deb`, then, as root on this machine, `apt install` of the four packages: the
#      library's SONAME link, C programs built through pkg-config against the installed
#      shared and static library and run, `slotpartner --version`, its man pages (the set the
#      command writes) and completions, `slotpartner-sandbox`; `apt-get remove --purge` leaves
#      none of their files. SKIPPED (said so) when not root or dpkg-buildpackage/debhelper are
#      missing; .ci/run installs them and runs as root, so CI never skips it.
#
# Needs: make, cc, pkg-config, readelf/ldd, python3 with venv (Debian: python3-venv; pip fetches
# setuptools from PyPI for the isolated build unless cached), php with FFI, composer; for 6,
# root, dpkg-dev, debhelper, apt.
# Builds through `make install` (the library, the command and the sandbox). Prints
# "install: N passed, N failed" last.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
make=${MAKE:-make}
cc=${CC:-cc}
python=${PYTHON:-python3}
php=${PHP:-php}
work=$(mktemp -d)
packages=(libslotpartner0 libslotpartner-dev slotpartner slotpartner-sandbox)
installed_packages=no # part 6: yes while its packages are on this machine
cleanup() {
  if [ "$installed_packages" = yes ]; then
    apt-get remove -y -qq --purge -o DPkg::Lock::Timeout=120 "${packages[@]}" > /dev/null 2>&1
  fi
  rm -rf "$work"
}
trap cleanup EXIT
passed=0 failed=0
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL $1: $2"; }
check() { # NAME EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then pass; else fail "$1" "expected [$2], got [$3]"; fi
}
# Runs a command quietly; on failure records NAME and shows its output.
run() { # NAME COMMAND...
  local name=$1
  shift
  if "$@" > "$work/run.log" 2>&1; then
    pass
    return 0
  fi
  fail "$name" "\`$*\` failed:"
  sed 's/^/    /' "$work/run.log" | tail -n 30
  return 1
}

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
major=${version%%.*}
soname=libslotpartner.so.$major
token=6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f
fixtures=$root/tests/fixtures
expected=$root/tests/c/expected
unset SLOTPARTNER_LIB PKG_CONFIG_LIBDIR

# What `find` shows of an installed tree: type, mode, path, link target.
listing() { # DIR
  (cd "$1" && find . -mindepth 1 \( -type f -o -type l \) -printf '%y %m %P %l\n' | sort)
}
man_pages=() # the pages `slotpartner man --out DIR` writes, once the command is built
expected_listing() {
  {
    printf '%s\n' \
      "f 644 include/slotpartner.h " \
      "f 644 lib/libslotpartner.a " \
      "f 644 lib/pkgconfig/slotpartner.pc " \
      "f 755 bin/slotpartner " \
      "f 755 bin/slotpartner-sandbox " \
      "f 644 share/bash-completion/completions/slotpartner " \
      "f 644 share/zsh/vendor-completions/_slotpartner " \
      "f 644 share/fish/vendor_completions.d/slotpartner.fish " \
      "f 755 lib/libslotpartner.so.$version " \
      "l 777 lib/$soname libslotpartner.so.$version" \
      "l 777 lib/libslotpartner.so libslotpartner.so.$version"
    for page in "${man_pages[@]}"; do echo "f 644 share/man/man1/$page "; done
  } | sort
}
pc() { pkg-config "$@" | sed 's/ *$//'; } # pkgconf ends its output with a space
soname_of() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p'; }

echo "--- make install DESTDIR=... PREFIX=/usr/local (version $version, SONAME $soname)"
stage=$work/stage
if run install_staged "$make" --no-print-directory install DESTDIR="$stage" PREFIX=/usr/local; then
  # The man pages: the command's own page and one a subcommand.
  mkdir "$work/man" && target/release/slotpartner man --out "$work/man"
  mapfile -t man_pages < <(cd "$work/man" && ls)
  for page in slotpartner.1 slotpartner-journal-status.1 slotpartner-recover.1; do
    check "man_page $page" "yes" "$(grep -q '^\.TH' "$work/man/$page" 2> /dev/null && echo yes)"
  done
  check layout_staged "$(expected_listing)" "$(listing "$stage/usr/local")"
  check soname_staged "$soname" "$(soname_of "$stage/usr/local/lib/libslotpartner.so.$version")"
  check soname_build "$soname" "$(soname_of target/release/libslotpartner.so)"
  pc=$stage/usr/local/lib/pkgconfig/slotpartner.pc
  check pc_prefix "prefix=/usr/local" "$(grep '^prefix=' "$pc")"
  check pc_version "Version: $version" "$(grep '^Version:' "$pc")"
  check pc_libs_private "Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc" "$(grep '^Libs.private:' "$pc")"
  # pkg-config finds it through --define-prefix too (relocated tree).
  check pc_relocated "-I$stage/usr/local/include" \
    "$(PKG_CONFIG_PATH=$stage/usr/local/lib/pkgconfig pc --define-prefix --cflags slotpartner)"
  check command_staged "slotpartner $version" "$("$stage/usr/local/bin/slotpartner" --version 2>&1)"
  check sandbox_staged "slotpartner-sandbox $version" "$("$stage/usr/local/bin/slotpartner-sandbox" --version 2>&1)"
  # bash takes the completion script: it registers a completion for the command.
  check bash_completion_staged "slotpartner" "$(bash -c 'source "$1" && complete -p slotpartner' _ \
    "$stage/usr/local/share/bash-completion/completions/slotpartner" 2>&1 | awk '{print $NF}')"
  # Installed over an older install whose libslotpartner.so was a file: becomes the link.
  rm "$stage/usr/local/lib/libslotpartner.so"
  cp target/release/libslotpartner.so "$stage/usr/local/lib/libslotpartner.so"
  run reinstall_staged "$make" --no-print-directory install DESTDIR="$stage" PREFIX=/usr/local &&
    check layout_reinstalled "$(expected_listing)" "$(listing "$stage/usr/local")"
fi
# The installed command of a release that cannot write man pages (or none at all): uninstall
# removes everything all the same.
printf '#!/bin/sh\nexit 2\n' > "$stage/usr/local/bin/slotpartner"
run uninstall_staged "$make" --no-print-directory uninstall DESTDIR="$stage" PREFIX=/usr/local
check uninstalled_staged "" "$(listing "$stage")"

echo "--- make install PREFIX=PRIVATE; C programs through pkg-config"
prefix=$work/prefix
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
if run install_private "$make" --no-print-directory install PREFIX="$prefix"; then
  check layout_private "$(expected_listing)" "$(listing "$prefix")"
  run pc_exists pkg-config --exists --print-errors slotpartner
  check pc_modversion "$version" "$(pc --modversion slotpartner)"
  check pc_cflags "-I$prefix/include" "$(pc --cflags slotpartner)"
  check pc_libs "-L$prefix/lib -lslotpartner" "$(pc --libs slotpartner)"
  check pc_static_libs "-L$prefix/lib -lslotpartner -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc" \
    "$(pc --static --libs slotpartner)"

  strict=(-std=c11 -Wall -Wextra -Werror -pedantic -O2)
  bin=$work/bin
  mkdir -p "$bin"
  # shellcheck disable=SC2046 # pkg-config's output is meant to be split into words
  for program in inspect_event callback_cgi; do
    # Shared, found through a run path recorded in the program.
    run "cc_shared_$program" "$cc" "${strict[@]}" "examples/c/$program.c" -o "$bin/${program}_shared" \
      $(pkg-config --cflags --libs slotpartner) -Wl,-rpath,"$prefix/lib"
    # Shared, with no run path: found through LD_LIBRARY_PATH (or ldconfig) only.
    run "cc_shared_norpath_$program" "$cc" "${strict[@]}" "examples/c/$program.c" -o "$bin/${program}_norpath" \
      $(pkg-config --cflags --libs slotpartner)
    # Static: pkg-config --static gives the native libraries the archive needs (Libs.private);
    # -l:libslotpartner.a names the archive, since next to libslotpartner.so the linker
    # would take the shared library for -lslotpartner.
    run "cc_static_$program" "$cc" "${strict[@]}" "examples/c/$program.c" -o "$bin/${program}_static" \
      $(pkg-config --static --cflags --libs slotpartner | sed 's/-lslotpartner\b/-l:libslotpartner.a/')
  done

  # Programs record the SONAME, not the development link nor the versioned file.
  check needed_shared "$soname" "$(readelf -d "$bin/inspect_event_shared" | sed -n 's/.*(NEEDED).*\[\(libslotpartner[^]]*\)\].*/\1/p')"
  check ldd_shared "$soname => $prefix/lib/$soname" \
    "$(ldd "$bin/inspect_event_shared" | sed -n 's/^[[:space:]]*\(libslotpartner[^ ]* => [^ ]*\).*/\1/p')"
  check ldd_static "" "$(ldd "$bin/inspect_event_static" | grep libslotpartner)"
  check needed_static "" "$(readelf -d "$bin/callback_cgi_static" | grep libslotpartner)"
  # Without a run path or LD_LIBRARY_PATH a library in a private prefix is not found.
  "$bin/inspect_event_norpath" "$fixtures/refund.json" > "$work/out" 2>&1
  rc=$?
  if [ "$rc" = 127 ] && grep -q "$soname: cannot open shared object file" "$work/out"; then pass; else
    fail norpath_unfound "expected the loader to miss $soname (exit 127), got exit $rc: $(head -c 300 "$work/out")"
  fi

  # A callback parsed (inspect_event) and parsed, authenticated and answered (callback_cgi).
  for kind in shared norpath static; do
    lib_path=()
    [ "$kind" = norpath ] && lib_path=(LD_LIBRARY_PATH="$prefix/lib")
    out=$(env "${lib_path[@]}" "$bin/inspect_event_$kind" "$fixtures/refund.json" 2>&1; echo "exit: $?")
    check "inspect_$kind" "$(cat "$expected/inspect_refund.out")" "$out"
    out=$(env -i PATH="$PATH" "${lib_path[@]}" SLOTPARTNER_TOKEN=$token SLOTPARTNER_SOURCES=production \
      GATEWAY_INTERFACE=CGI/1.1 REQUEST_METHOD=POST CONTENT_LENGTH="$(wc -c < "$fixtures/payout.json")" \
      REMOTE_ADDR=18.203.30.17 HTTP_X_SERVICE_TOKEN=$token CONTENT_TYPE=application/json \
      "$bin/callback_cgi_$kind" < "$fixtures/payout.json" 2> /dev/null | tr -d '\r'; echo "exit: ${PIPESTATUS[0]}")
    check "callback_$kind" "$(cat "$expected/cgi_payout.out")" "$out"
  done
fi

echo "--- pip wheel ./bindings/python; installed into a fresh venv"
venv=$work/venv
wheels=$work/wheels
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
if ! "$python" -m venv "$venv" > "$work/venv.log" 2>&1; then
  fail venv "$python -m venv failed (Debian: apt-get install python3-venv): $(tail -n 3 "$work/venv.log")"
elif run pip_wheel "$venv/bin/python" -m pip wheel --no-deps ./bindings/python -w "$wheels"; then
  shopt -s nullglob
  found=("$wheels"/slotpartner-*.whl)
  shopt -u nullglob
  check wheel_count 1 "${#found[@]}"
  wheel=${found[0]:-none}
  platform=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_platform().replace("-", "_").replace(".", "_"))')
  case $(basename "$wheel") in
    "slotpartner-$version-py3-none-$platform.whl" | "slotpartner-$version"-*-manylinux*.whl) pass ;;
    *) fail wheel_tag "expected slotpartner-$version-py3-none-$platform.whl (a platform tag), got $(basename "$wheel")" ;;
  esac
  # What the wheel holds: the library, a platlib wheel, the library's SONAME.
  "$venv/bin/python" - "$wheel" "$work/bundled.so" > "$work/wheel.txt" 2>&1 << 'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    names = wheel.namelist()
    print("library:", "slotpartner/libslotpartner.so" in names)
    meta = next(n for n in names if n.endswith(".dist-info/WHEEL"))
    print([line for line in wheel.read(meta).decode().splitlines() if line.startswith("Root-Is-Purelib")][0])
    with open(sys.argv[2], "wb") as out:
        out.write(wheel.read("slotpartner/libslotpartner.so"))
EOF
  check wheel_contents "library: True
Root-Is-Purelib: false" "$(cat "$work/wheel.txt")"
  check wheel_soname "$soname" "$(soname_of "$work/bundled.so" 2> /dev/null)"
  if run pip_install "$venv/bin/python" -m pip install --no-index --no-deps "$wheel"; then
    # Outside the checkout, without SLOTPARTNER_LIB or PYTHONPATH: the bundled library.
    out=$(cd "$work" && env -u PYTHONPATH "$venv/bin/python" - "$fixtures/payout.json" "$token" 2>&1 << 'EOF'
import os, sys, sysconfig
import slotpartner
site = os.path.realpath(sysconfig.get_paths()["platlib"])
assert os.path.realpath(slotpartner.__file__).startswith(site + os.sep), slotpartner.__file__
assert os.path.realpath(slotpartner.library_path) == os.path.join(site, "slotpartner", "libslotpartner.so"), slotpartner.library_path
body = open(sys.argv[1], "rb").read()
receiver = slotpartner.Receiver(sys.argv[2], sources="production")
event = receiver.handle(sys.argv[2], "18.203.30.17", body)
print(type(event).__name__, event.transaction_id, event.money_won, event.reply(True).decode())
EOF
    )
    check python_callback 'JackpotPayout 900002 150000 {"payout":{"success":true,"errorMessage":""}}' "$out"
  fi
fi

echo "--- composer install of bindings/php (the README's snippet), offline"
app=$work/php-app
mkdir -p "$app"
export COMPOSER_HOME=$work/composer-home COMPOSER_CACHE_DIR=$work/composer-cache COMPOSER_ALLOW_SUPERUSER=1
export COMPOSER_NO_INTERACTION=1 COMPOSER_DISABLE_NETWORK=1
composer_json=$("$php" -r '
  $package = json_decode(file_get_contents($argv[1]), true, 512, JSON_THROW_ON_ERROR);
  echo $package["version"] ?? "none";' "$root/bindings/php/composer.json")
check composer_version "$version" "$composer_json"
# The first ```json block after "With Composer" in the README, its path made this checkout's.
"$php" -r '
  $readme = file_get_contents($argv[1]);
  if (!preg_match("/With Composer.*?```json\n(.*?)```/s", $readme, $m)) { fwrite(STDERR, "no snippet\n"); exit(1); }
  if (!str_contains($m[1], "/path/to/slotpartner/bindings/php")) { fwrite(STDERR, "no /path/to/slotpartner in the snippet\n"); exit(1); }
  echo str_replace("/path/to/slotpartner/bindings/php", $argv[2], $m[1]);' \
  "$root/bindings/php/README.md" "$root/bindings/php" > "$app/composer.json" 2> "$work/snippet.err"
check readme_snippet "" "$(cat "$work/snippet.err")"
if ! command -v composer > /dev/null 2>&1; then
  fail composer "composer is not installed (Debian: apt-get install composer)"
elif run composer_install composer --working-dir="$app" install --no-progress; then
  check composer_installed "slotpartner/slotpartner $version" \
    "$(composer --working-dir="$app" show slotpartner/slotpartner 2> /dev/null | awk '/^name/ {n=$3} /^versions/ {v=$4} END {print n, v}')"
  cat > "$app/app.php" << 'EOF'
<?php
declare(strict_types=1);
require __DIR__ . '/vendor/autoload.php';

$receiver = new SlotPartner\Receiver(tokens: $argv[2], sources: 'production');
$event = $receiver->handle($argv[2], '18.203.30.17', file_get_contents($argv[1]));
printf("%s %d %d %s %s\n", $event::class, $event->transactionId, $event->moneyWon, $event->reply(true),
    SlotPartner\Library::source());
EOF
  want='SlotPartner\JackpotPayout 900002 150000 {"payout":{"success":true,"errorMessage":""}}'
  # As installed: the package (a link into the checkout) finds the checkout's build.
  check php_callback "$want cdef" "$(cd "$app" && "$php" -d ffi.enable=preload app.php "$fixtures/payout.json" $token 2>&1)"
  # The library installed in the private prefix.
  check php_callback_installed "$want cdef" "$(cd "$app" && SLOTPARTNER_LIB=$prefix/lib/$soname \
    "$php" -d ffi.enable=preload app.php "$fixtures/payout.json" $token 2>&1)"

  # vendor/bin/slotpartner-preload-header: --lib before or after the output, --lib=PATH, "-".
  tool=$app/vendor/bin/slotpartner-preload-header
  lib=$prefix/lib/$soname
  for args in "--lib $lib $work/h1.h" "$work/h1.h --lib $lib" "--lib=$lib $work/h1.h" "- --lib $lib"; do
    rm -f "$work/h1.h"
    # shellcheck disable=SC2086 # the arguments are meant to be split
    "$tool" $args > "$work/h1.out" 2> "$work/h1.err"
    rc=$?
    header=$work/h1.h
    [ "${args%% *}" = - ] && header=$work/h1.out
    check "preload_header [$args]" "0 #define FFI_SCOPE \"SLOTPARTNER\" #define FFI_LIB \"$lib\"" \
      "$rc $(head -n 2 "$header" 2> /dev/null | tr '\n' ' ' | sed 's/ $//')$(cat "$work/h1.err")"
  done
  for args in "" "a.h b.h" "--lib" "a.h --lib" "--lib= a.h" "--frobnicate a.h"; do
    # shellcheck disable=SC2086
    (cd "$work" && "$tool" $args > /dev/null 2> "$work/usage.err")
    rc=$?
    if [ "$rc" = 2 ] && grep -q '^usage: slotpartner-preload-header' "$work/usage.err"; then pass; else
      fail "preload_header_usage [$args]" "exit $rc: $(cat "$work/usage.err")"
    fi
  done
  # A relative --lib is made absolute (FFI_LIB is read by a server with another working directory).
  (cd "$prefix" && "$tool" --lib "lib/$soname" "$work/h2.h")
  check preload_header_relative "#define FFI_LIB \"$prefix/lib/$soname\"" "$(sed -n 2p "$work/h2.h")"
  # The header under ffi.preload: the binding uses the scope, so the installed library.
  "$tool" "$work/preload.h" --lib "$lib"
  check php_callback_preloaded "$want scope" "$(cd "$app" && "$php" -d ffi.enable=preload -d ffi.preload="$work/preload.h" \
    app.php "$fixtures/payout.json" $token 2>&1)"
  check php_preloaded_library "$prefix/lib/libslotpartner.so.$version" \
    "$("$php" -d ffi.enable=preload -d ffi.preload="$work/preload.h" -r '
      FFI::scope("SLOTPARTNER")->sp_version();
      echo preg_match("~ (/\S*libslotpartner\S*)$~m", file_get_contents("/proc/self/maps"), $m) ? $m[1] : "not mapped";' 2>&1)"
fi

echo "--- make uninstall PREFIX=PRIVATE"
run uninstall_private "$make" --no-print-directory uninstall PREFIX="$prefix"
check uninstalled_private "" "$(listing "$prefix")"

echo "--- make deb; apt install ./target/deb/*.deb on this machine; apt-get remove --purge"
if [ "$(id -u)" != 0 ]; then
  echo "deb: SKIPPED (not root: installing the packages on this machine needs root)"
elif ! command -v dpkg-buildpackage > /dev/null || ! command -v dh > /dev/null || ! command -v apt > /dev/null; then
  echo "deb: SKIPPED (dpkg-buildpackage, dh or apt missing: apt-get install dpkg-dev debhelper fakeroot)"
else
  export DEBIAN_FRONTEND=noninteractive
  unset PKG_CONFIG_PATH
  arch=$(dpkg --print-architecture)
  multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
  libdir=/usr/lib/$multiarch
  debs=()
  for package in "${packages[@]}"; do debs+=("target/deb/${package}_${version}_$arch.deb"); done
  # Files of the packages must not be here already (from another install): the test would
  # replace them and then remove them.
  present=$(dpkg-query -W -f='${Package} ${Status}\n' "${packages[@]}" 2> /dev/null | grep ' installed$' || true)
  strays=$(ls -d /usr/bin/slotpartner /usr/bin/slotpartner-sandbox /usr/include/slotpartner.h \
    "$libdir"/libslotpartner* 2> /dev/null || true)
  beside=$(cd .. && ls -d slotpartner_* libslotpartner* slotpartner-sandbox_* 2> /dev/null || true)
  if [ -n "$present" ] || [ -n "$strays" ]; then
    fail deb_clean_machine "already on this machine (remove them first: apt-get remove --purge ${packages[*]}): $present $strays"
  elif run make_deb "$make" --no-print-directory deb; then
    check deb_files "$(printf '%s\n' "${debs[@]}" | sort)" "$(ls target/deb/*.deb | sort)"
    check deb_nothing_beside_checkout "$beside" "$(cd .. && ls -d slotpartner_* libslotpartner* slotpartner-sandbox_* 2> /dev/null)"
    check deb_debian_clean "" "$(git status --porcelain --ignored debian 2> /dev/null | grep -v '^?? debian/$')"
    # Every path the packages hold, and which of them this machine had before (directories
    # such as /usr/bin): after the removal nothing else may be left.
    for deb in "${debs[@]}"; do dpkg-deb -x "$deb" "$work/deb-tree"; done
    (cd "$work/deb-tree" && find . -mindepth 1 | sed 's|^\.||' | sort) > "$work/deb-paths"
    while read -r path; do [ -e "$path" ] && echo "$path"; done < "$work/deb-paths" > "$work/deb-before"
    # apt waits up to 2 minutes for another package manager to release its lock.
    if run apt_install apt install -y -o DPkg::Lock::Timeout=120 "${debs[@]/#/./}"; then
      installed_packages=yes
      check deb_installed "$(printf '%s install ok installed\n' "${packages[@]}")" \
        "$(for p in "${packages[@]}"; do dpkg-query -W -f='${Package} ${Status}\n' "$p"; done)"
      check deb_version "$version" "$(dpkg-query -W -f='${Version}' slotpartner)"
      check deb_soname_link "libslotpartner.so.$version" "$(readlink "$libdir/$soname")"
      check deb_dev_link "libslotpartner.so.$version" "$(readlink "$libdir/libslotpartner.so")"
      check deb_soname "$soname" "$(soname_of "$libdir/libslotpartner.so.$version")"
      check deb_owner_lib "libslotpartner0:$arch: $libdir/$soname" "$(dpkg -S "$libdir/$soname")"
      check deb_owner_dev "libslotpartner-dev:$arch: $libdir/pkgconfig/slotpartner.pc" \
        "$(dpkg -S "$libdir/pkgconfig/slotpartner.pc")"
      check deb_ldconfig "yes" "$(ldconfig -p | grep -q "^[[:space:]]*$soname " && echo yes)"
      check deb_pc_modversion "$version" "$(pc --modversion slotpartner)"

      # The C examples built against the installed package through pkg-config, and run.
      strict=(-std=c11 -Wall -Wextra -Werror -pedantic -O2)
      bin=$work/deb-bin
      mkdir -p "$bin"
      # shellcheck disable=SC2046 # pkg-config's output is meant to be split into words
      for program in inspect_event callback_cgi; do
        run "deb_cc_shared_$program" "$cc" "${strict[@]}" "examples/c/$program.c" -o "$bin/${program}_shared" \
          $(pkg-config --cflags --libs slotpartner)
        run "deb_cc_static_$program" "$cc" "${strict[@]}" "examples/c/$program.c" -o "$bin/${program}_static" \
          $(pkg-config --static --cflags --libs slotpartner | sed 's/-lslotpartner\b/-l:libslotpartner.a/')
      done
      # No run path, no LD_LIBRARY_PATH: the loader finds the SONAME through ld.so.cache.
      check deb_ldd_shared "$libdir/libslotpartner.so.$version" \
        "$(readlink -f "$(ldd "$bin/inspect_event_shared" | sed -n 's/^[[:space:]]*libslotpartner[^ ]* => \([^ ]*\).*/\1/p')")"
      check deb_ldd_static "" "$(ldd "$bin/inspect_event_static" | grep libslotpartner)"
      for kind in shared static; do
        out=$("$bin/inspect_event_$kind" "$fixtures/refund.json" 2>&1; echo "exit: $?")
        check "deb_inspect_$kind" "$(cat "$expected/inspect_refund.out")" "$out"
        out=$(env -i PATH="$PATH" SLOTPARTNER_TOKEN=$token SLOTPARTNER_SOURCES=production \
          GATEWAY_INTERFACE=CGI/1.1 REQUEST_METHOD=POST CONTENT_LENGTH="$(wc -c < "$fixtures/payout.json")" \
          REMOTE_ADDR=18.203.30.17 HTTP_X_SERVICE_TOKEN=$token CONTENT_TYPE=application/json \
          "$bin/callback_cgi_$kind" < "$fixtures/payout.json" 2> /dev/null | tr -d '\r'; echo "exit: ${PIPESTATUS[0]}")
        check "deb_callback_$kind" "$(cat "$expected/cgi_payout.out")" "$out"
      done

      # The command, its man pages (compressed by the package build) and completions; the sandbox.
      check deb_command "slotpartner $version" "$(/usr/bin/slotpartner --version 2>&1)"
      check deb_sandbox "slotpartner-sandbox $version" "$(/usr/bin/slotpartner-sandbox --version 2>&1)"
      check deb_man_pages "$(printf '%s.gz\n' "${man_pages[@]}" | sort)" \
        "$(dpkg -L slotpartner | sed -n 's|^/usr/share/man/man1/||p' | sort)"
      check deb_man_page "yes" "$(zcat /usr/share/man/man1/slotpartner-journal-status.1.gz | grep -q '^\.TH' && echo yes)"
      check deb_bash_completion "slotpartner" "$(bash -c 'source /usr/share/bash-completion/completions/slotpartner \
        && complete -p slotpartner' 2>&1 | awk '{print $NF}')"
      check deb_zsh_completion "#compdef slotpartner" "$(head -n 1 /usr/share/zsh/vendor-completions/_slotpartner)"
      check deb_fish_completion "yes" "$(grep -q '^complete -c slotpartner' /usr/share/fish/vendor_completions.d/slotpartner.fish && echo yes)"

      # make uninstall PREFIX=/usr leaves what the packages own (dpkg's records stay true).
      run deb_uninstall_leaves_packages "$make" --no-print-directory uninstall PREFIX=/usr \
        LIBDIR="/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)"
      check deb_verify_after_uninstall "" "$(dpkg --verify "${packages[@]}" 2>&1)"

      if run apt_remove apt-get remove -y --purge -o DPkg::Lock::Timeout=120 "${packages[@]}"; then
        installed_packages=no
        check deb_removed "" "$(dpkg-query -W -f='${Package} ${Status}\n' "${packages[@]}" 2> /dev/null | grep -v 'not-installed$')"
        # Nothing the packages laid out is left: no file, link or directory of theirs.
        check deb_nothing_left "" "$(while read -r path; do
          if [ -e "$path" ] || [ -L "$path" ]; then echo "$path"; fi; done < "$work/deb-paths" |
          comm -23 - "$work/deb-before")"
        check deb_ldconfig_removed "" "$(ldconfig -p | grep libslotpartner)"
        check deb_pc_removed "no" "$(pkg-config --exists slotpartner && echo yes || echo no)"
      fi
    fi
  fi
fi

echo "install: $passed passed, $failed failed"
[ "$failed" = 0 ]
