#!/usr/bin/env bash
# Runs the PHP binding's tests (tests/*_test.php, plain PHP, no PHPUnit) against the checkout's
# target/release/libslotpartner.so and target/release/slotpartner-sandbox (build them first:
# `make` and `cargo build --release -p slotpartner-sandbox`, or `make sandbox`).
# Prints one "file: N passed, N failed" line per file, then "N passed, N failed"; exits non-zero
# on any failure.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
php=${PHP:-php}

for need in "$root/target/release/libslotpartner.so" "$root/target/release/slotpartner-sandbox" "$root/target/release/slotpartner"; do
  if [ ! -e "$need" ]; then
    echo "missing $need: run \`make\` and \`cargo build --release -p slotpartner-sandbox\` first"
    echo "0 passed, 1 failed"
    exit 1
  fi
done
# What the tests load, checked before any runs (tests/needs.sh). PHP's extensions: FFI (all),
# pdo_sqlite (staged_test.php reads the journal's file through PDO), mbstring (staged_test.php),
# Zend OPcache (the preload tests), pcntl and posix (fork_test.php, and stopping php -S with its
# workers). Tools: setsid (php -S in a process group of its own), python3 with sqlite3
# (journal_test.php holds the journal's lock from another process), cc (fork_test.php builds a
# C helper). fpm_test.php serves the endpoint through nginx and PHP-FPM, with the PSR-7 and
# HttpFoundation adapters on Debian's packages of them, and drops the servers to nobody with
# setpriv (util-linux) when run as root.
# shellcheck source=../../tests/needs.sh
. "$root/tests/needs.sh"
if command -v "$php" > /dev/null 2>&1; then
  while IFS='|' read -r extension package; do
    [ -n "$extension" ] && needs_item "the PHP extension $extension" "$package"
  done < <("$php" -r '
    $v = PHP_MAJOR_VERSION . "." . PHP_MINOR_VERSION;
    $packages = ["FFI" => "php$v-common", "pdo_sqlite" => "php$v-sqlite3", "mbstring" => "php$v-mbstring",
      "Zend OPcache" => "php$v-opcache", "pcntl" => "php$v-cli", "posix" => "php$v-common"];
    foreach ($packages as $extension => $package) {
        if (!extension_loaded($extension)) {
            echo $extension, "|", $package, "\n";
        }
    }')
else
  needs_item "$php" php-cli
fi
needs_command setsid util-linux
needs_command setpriv util-linux
[ -x /usr/sbin/nginx ] || needs_item nginx nginx
if command -v "$php" > /dev/null 2>&1; then
  php_version=$("$php" -r 'echo PHP_MAJOR_VERSION, ".", PHP_MINOR_VERSION;')
  [ -x "/usr/sbin/php-fpm$php_version" ] || needs_item "php-fpm$php_version" "php$php_version-fpm"
fi
[ -f /usr/share/php/Nyholm/Psr7/autoload.php ] || needs_item "Nyholm's PSR-7" php-nyholm-psr7
[ -f /usr/share/php/Symfony/Component/HttpFoundation/autoload.php ] || needs_item "Symfony's HttpFoundation" php-symfony-http-foundation
needs_command python3 python3
needs_python_module sqlite3 python3
needs_command "${CC:-cc}" gcc
needs_check php_tests

export SLOTPARTNER_LIB="$root/target/release/libslotpartner.so"
passed=0 failed=0
for test in "$here"/tests/*_test.php; do
  name=$(basename "$test")
  out=$("$php" -d ffi.enable=preload -d zend.assertions=1 "$test" 2>&1); rc=$?
  summary=$(printf '%s\n' "$out" | tail -n 1)
  if [[ "$summary" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
    p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]}
  else
    p=0 f=1
  fi
  if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
  if [ "$f" != 0 ]; then printf '%s\n' "$out" | sed 's/^/  /'; fi
  echo "$name: $p passed, $f failed"
  passed=$((passed + p)) failed=$((failed + f))
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
