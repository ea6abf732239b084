#!/usr/bin/env bash
# The closed ABI of libnetsparse: every dynamic symbol it defines is a C API function (ns_*) or
# belongs to a public C++ name, one listed in lib/netsparse.map and declared in
# include/netsparse/; and every name the map lists is still declared there.
# Usage: check_exports.sh LIBRARY MAP INCLUDE_DIR
set -euo pipefail
lib=$1 map=$2 include=$3
mapfile -t names < <(grep -oE '^ +netsparse::[A-Za-z_0-9]+;' "$map" | sed -E 's/^ +netsparse::|;$//g')
[[ ${#names[@]} -gt 0 ]] || { echo "no public names found in $map"; exit 1; }
declare -A public=()
status=0
for n in "${names[@]}"; do
  public[$n]=1
  if ! grep -rqw --include='*.h' --include='*.hpp' -- "$n" "$include"; then
    echo "listed in the map but declared nowhere in $include: netsparse::$n"
    status=1
  fi
done
count=0 c_api=0 cxx=0
while IFS= read -r sym; do
  sym=${sym%@@*}
  [[ $sym == NETSPARSE_0.* ]] && continue  # the version node itself
  count=$((count + 1))
  if [[ $sym == ns_* ]]; then
    c_api=$((c_api + 1))
    continue
  fi
  # A public class's `Impl` (its pimpl) is internal: NETSPARSE_LOCAL hides it, and a pattern of
  # the map that matches its members must not export them.
  if [[ $sym == *::Impl::* || $sym == *::Impl ]]; then
    echo "exported but internal (a pimpl): $sym"
    status=1
    continue
  fi
  bare=$(sed -E 's/^(typeinfo name for |typeinfo for |vtable for |non-virtual thunk to |guard variable for |VTT for )//' <<<"$sym")
  if [[ $bare =~ ^netsparse::([A-Za-z_0-9]+)($|\[abi:cxx11\]|\(|::) ]] &&
     [[ -n ${public[${BASH_REMATCH[1]}]+x} ]]; then
    cxx=$((cxx + 1))
    continue
  fi
  echo "exported but not public: $sym"
  status=1
done < <(nm -D --defined-only -C "$lib" | cut -d' ' -f3-)
echo "$count exported symbols: $c_api ns_* C functions, $cxx of the ${#names[@]} public C++ names"
[[ $count -gt 0 ]] || { echo "no symbols read from $lib"; exit 1; }
exit $status
