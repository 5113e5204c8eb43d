#!/bin/sh
# The help2man include file for qconv.1: tools/qconv.h2m, then a section with each subcommand's
# own help (qconv help SUBCOMMAND), so that the man page lists every flag --help does.
# Usage: man_include.sh QCONV_BINARY qconv.h2m OUTPUT
set -eu
{
  cat "$2"
  printf '\n[SUBCOMMANDS]\n'
  for c in convert verify inspect targets passes; do
    printf '.SS "qconv %s"\n.nf\n' "$c"
    "$1" help "$c" | sed -e 's/\\/\\e/g' -e 's/^\./\\\&./' -e "s/^'/\\\\\&'/"
    printf '.fi\n'
  done
} > "$3"
