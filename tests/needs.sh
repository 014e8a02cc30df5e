# Sourced by the test runners to check, before any test runs, what their tests load; a runner
# that lacks something fails at once with one line naming the Debian packages to install.
#
#   needs_command COMMAND PACKAGE      COMMAND is not in PATH: PACKAGE is missing
#   needs_python_module MODULE PACKAGE python3 cannot import MODULE: PACKAGE is missing
#   needs_item WHAT PACKAGE            anything else the runner found missing (WHAT names it)
#   needs_check RUNNER                 when something is missing, prints
#       "RUNNER: cannot run without WHAT (PACKAGE), ...: apt-get install PACKAGE..."
#     then "0 passed, 1 failed", and exits 1; returns when nothing is missing.

needs_missing=()
needs_packages=()

needs_item() {
  needs_missing+=("$1 ($2)")
  needs_packages+=("$2")
}

needs_command() {
  command -v "$1" > /dev/null 2>&1 || needs_item "$1" "$2"
}

needs_python_module() {
  python3 -c "import $1" > /dev/null 2>&1 || needs_item "python3's module $1" "$2"
}

needs_check() {
  [ ${#needs_missing[@]} -eq 0 ] && return 0
  local what packages
  what=$(printf '%s, ' "${needs_missing[@]}")
  packages=$(printf '%s\n' "${needs_packages[@]}" | sort -u | tr '\n' ' ')
  echo "$1: cannot run without ${what%, }: apt-get install ${packages% }"
  echo "0 passed, 1 failed"
  exit 1
}
