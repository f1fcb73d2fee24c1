# kill-rate.jq: a shipped matrix cut down for ci/kill-rate.sh (see there).
# $root: the source tree relative to the new matrix's folder; $models,
# $quants, $backends, $profiles: the ids kept (JSON arrays); $tier: the tier
# kept, with the suites in $drop removed and $settings merged into its
# settings. Tolerances and gate are the shipped ones; only what would name
# a cell that no longer exists goes (a matrix is refused when a tolerance
# override or an optional-gate rule matches no cell), so every cell left is
# judged exactly as in the shipped matrix. Survivors keep only the kept
# tier in their "tiers" (the script reads them from the shipped matrix; a
# tier name that is gone would make the cut-down matrix invalid).
def glob(s): ("^" + (s | gsub("\\."; "\\.") | gsub("\\*"; ".*") | gsub("\\?"; ".")) + "$");
def any_match(pat; ids): [ids[] | select(test(glob(pat)))] | length > 0;
def bid: if type == "string" then . else .id end;
.root = $root
| .models = [.models[] | select(.id as $i | $models | index($i))
             | if .quants then .quants = [.quants[] | select(. as $q | $quants | index($q))] else . end]
| .quants = [.quants[] | select(. as $q | $quants | index($q))]
| .backends = [.backends[] | select(bid as $i | $backends | index($i))
               | if type == "object" and .drivers then
                   .drivers = [.drivers[] | select(.id as $d | $profiles | index($d))] else . end]
| del(.exclude[]? | select(.model as $m | $models | index($m) | not))
| .tolerances.quants = ((.tolerances.quants // {}) | with_entries(select(.key as $q | $quants | index($q))))
| ([.models[].id] as $ms | [.quants[]] as $qs
   | [.backends[] | (bid) as $b
      | (if type == "object" and ((.drivers // []) | length) > 0 then [.drivers[].id] else ["default"] end)[]
      | "\($b)/\(.)"] as $bs
   | [$ms[] as $m | $qs[] as $q | $bs[] as $b | "\($m)/\($q)/\($b)"]) as $cells
| .tolerances.cells = [(.tolerances.cells // [])[] | select(.cell as $pat | any_match($pat; $cells))]
| if .gate.optional then .gate.optional = [.gate.optional[] | select(.backend == null or
      (.backend as $b | $backends | index($b)))] else . end
| .tiers = {($tier): (.tiers[$tier]
    | .suites = [.suites[] | select(. as $s | $drop | index($s) | not)]
    | .settings = (((.settings // {}) | with_entries(select(.key as $s | $drop | index($s) | not)))
                   * $settings))}
| .default_tier = $tier
| if .survivors then .survivors = [.survivors[] | select(.tiers == null or (.tiers | index($tier)))
                                   | if .tiers then .tiers = [$tier] else . end] else . end
