#!/usr/bin/env bash
# Report what changed upstream in OpenAI Codex since the commit memoryd last aligned with.
#
#   CODEX_REPO=/path/to/codex scripts/check-codex-drift.sh      (or pass the repository as $1)
#   CODEX_HEAD=origin/main    compare with this ref instead of the repository's HEAD
#   CODEX_MAP=/path/map.yaml  use this map instead of codex-map.yaml at the repository root
#   scripts/check-codex-drift.sh --check-map [repo]   validate the map only (with a repository:
#                                                     also that every upstream path exists at codex_ref)
#   scripts/check-codex-drift.sh --list-map           print the validated map as tab-separated lines
#                                                     (watch <path> / map <ours> <theirs>, then
#                                                     v2watch <path> / v2map <ours> <theirs>)
#   --skip-v2 (or CODEX_SKIP_V2=1)  when the repository lacks v2_ref, check the codex_ref section
#                                   alone and say so, instead of failing (exit 2)
#
# The repository may be a clone with a work tree or a bare repository / fork mirror, as long as it
# holds codex_ref (and v2_ref, the commit of the map's v2 section, unless --skip-v2) and the commit
# to compare with. Each section is compared from its own ref. Nothing is fetched or written.
#
# Exit codes: 0 aligned (or map valid), 1 drift, 2 setup error (one line on stderr).
# Needs bash (3.2 or later), git, awk and coreutils; the map is read with awk (see the YAML subset
# documented at the top of codex-map.yaml).
set -euo pipefail

PROG="check-codex-drift"
MAX_COMMITS=25
export GIT_LITERAL_PATHSPECS=1 LC_ALL=C
# The repository is named explicitly; variables that point git elsewhere must not interfere.
unset GIT_DIR GIT_WORK_TREE GIT_COMMON_DIR GIT_INDEX_FILE GIT_NAMESPACE

die() {
    printf '%s: error: %s\n' "$PROG" "$*" >&2
    exit 2
}

usage() {
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
}

# ---- arguments ----------------------------------------------------------------------------------

check_map_only=0
list_map=0
skip_v2="${CODEX_SKIP_V2:-0}"
repo_arg=""
while [ $# -gt 0 ]; do
    case "$1" in
        -h | --help) usage; exit 0 ;;
        --check-map) check_map_only=1 ;;
        --list-map) list_map=1 ;;
        --skip-v2) skip_v2=1 ;;
        -*) die "unknown option $1 (try --help)" ;;
        *)
            [ -z "$repo_arg" ] || die "more than one repository given ($repo_arg, $1)"
            repo_arg="$1"
            ;;
    esac
    shift
done
repo="${repo_arg:-${CODEX_REPO:-}}"

script_dir="$(cd "$(dirname "$0")" && pwd -P)"
map="${CODEX_MAP:-$script_dir/../codex-map.yaml}"
[ -f "$map" ] || die "map not found: $map"
map_dir="$(cd "$(dirname "$map")" && pwd -P)"
map="$map_dir/$(basename "$map")"
map_name="$(basename "$map")"

if [ -t 1 ] && [ -z "${NO_COLOR:-}" ] && [ "${TERM:-dumb}" != dumb ]; then
    B=$'\033[1m' RED=$'\033[31m' GRN=$'\033[32m' YEL=$'\033[33m' DIM=$'\033[2m' OFF=$'\033[0m'
else
    B="" RED="" GRN="" YEL="" DIM="" OFF=""
fi

# ---- read the map -------------------------------------------------------------------------------
# awk turns the YAML subset into tab-separated records: kind, mapping index, line number, value.

parse_map() {
    awk -v sq="'" '
    function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
    function unquote(s) {
        q = substr(s, 1, 1)
        if (length(s) >= 2 && (q == "\"" || q == sq) && substr(s, length(s), 1) == q) return substr(s, 2, length(s) - 2)
        return s
    }
    function emit(kind, value) { printf "%s\t%d\t%d\t%s\n", kind, idx, NR, value }
    function fail(msg) { printf "err\t0\t%d\t%s\n", NR, msg; failed = 1; exit }
    function scalar(v, what) {
        v = unquote(trim(v))
        if (v ~ /^[\[{&*!|>]/) fail(what " must be a plain scalar (flow collections, anchors and block scalars are outside the supported subset)")
        return v
    }
    function map_key(key, value) {
        if (key == "ours") {
            if (has_ours) fail("mapping has two ours keys")
            value = scalar(value, "ours")
            if (value == "") fail("ours is empty")
            has_ours = 1; emit("ours", value)
        } else if (key == "theirs") {
            if (has_theirs) fail("mapping has two theirs keys")
            has_theirs = 1
            value = trim(value)
            if (value == "") { list = "theirs"; return }
            emit("theirs", scalar(value, "theirs"))
        } else if (key == "note") {
            if (has_note) fail("mapping has two note keys")
            has_note = 1
            value = trim(value)
            if (value ~ /^[>|][+-]?$/) { in_note = 1; note_lines = 0; return }
            if (value == "") fail("note is empty")
            emit("note", "")
        } else {
            fail("unknown mapping key \"" key "\" (expected ours, theirs, note)")
        }
    }
    BEGIN { idx = 0; section = ""; list = ""; in_note = 0 }
    {
        line = $0
        sub(/\r$/, "", line)
        if (line ~ /^\t/ || line ~ /^ *\t/) fail("tab in indentation")
        if (in_note) {
            if (line ~ /^      / || line ~ /^[ ]*$/) { if (line !~ /^[ ]*$/) note_lines++; next }
            if (!note_lines) fail("folded note has no text")
            in_note = 0; emit("note", "")
        }
        if (line ~ /^[ ]*#/ || line ~ /^[ ]*$/) next
        if (line ~ /^---[ ]*$/ && NR == 1) next
        if (line ~ /^[^ ]/) {
            if (line !~ /^[A-Za-z_][A-Za-z0-9_]*:([ ].*)?$/) fail("expected a top-level \"key:\" line")
            key = line; sub(/:.*/, "", key)
            value = line; sub(/^[^:]*:/, "", value); value = trim(value)
            if (seen[key]++) fail("duplicate top-level key " key)
            list = ""
            if (key == "codex_ref" || key == "codex_ref_date" || key == "v2_ref" || key == "v2_repo") {
                section = ""
                value = scalar(value, key)
                if (value == "") fail(key " is empty")
                emit(key == "codex_ref" ? "ref" : key == "codex_ref_date" ? "date" : key == "v2_ref" ? "v2ref" : "v2repo", value)
            } else if (key == "watch_paths" || key == "mappings" || key == "v2_watch_paths" || key == "v2_mappings") {
                if (value != "") fail(key " must be followed by a block list (\"  - ...\" lines)")
                section = key; sec_items = 0
            } else {
                fail("unknown top-level key " key " (expected codex_ref, codex_ref_date, watch_paths, mappings, v2_ref, v2_repo, v2_watch_paths, v2_mappings)")
            }
            next
        }
        if ((section == "watch_paths" || section == "v2_watch_paths") && line ~ /^  - /) {
            value = line; sub(/^  - /, "", value); value = scalar(value, "watch path")
            if (value == "") fail("empty watch path")
            emit(section == "watch_paths" ? "watch" : "v2watch", value); next
        }
        if (section == "v2_mappings") section_mapping = "v2"
        else if (section == "mappings") section_mapping = "ref"
        else section_mapping = ""
        if (section_mapping != "" && line ~ /^  - /) {
            idx++; sec_items++; has_ours = has_theirs = has_note = 0; list = ""
            emit("map", section_mapping)
            rest = line; sub(/^  - /, "", rest)
            if (rest !~ /^[a-z_]+:([ ].*)?$/) fail("a mapping item must start with \"- ours: <path>\"")
            key = rest; sub(/:.*/, "", key)
            value = rest; sub(/^[^:]*:/, "", value)
            map_key(key, value); next
        }
        if (section_mapping != "" && sec_items && line ~ /^    [a-z_]+:([ ].*)?$/) {
            list = ""
            rest = trim(line)
            key = rest; sub(/:.*/, "", key)
            value = rest; sub(/^[^:]*:/, "", value)
            map_key(key, value); next
        }
        if (section_mapping != "" && list == "theirs" && line ~ /^      - /) {
            value = line; sub(/^      - /, "", value); value = scalar(value, "theirs path")
            if (value == "") fail("empty theirs path")
            emit("theirs", value); next
        }
        fail("line is outside the supported YAML subset: " trim(line))
    }
    END {
        if (failed) exit
        if (in_note) { if (!note_lines) fail("folded note has no text"); emit("note", "") }
    }
    ' "$map"
}

parsed="$(parse_map)" || die "$map_name: could not be read"

codex_ref="" codex_ref_date="" ref_line=0 v2_ref="" v2_repo="" v2_line=0
watch=()
v2watch=()
map_ours=()
map_line=()
map_ntheirs=()
map_sec=()
theirs_path=()
theirs_map=()
theirs_line=()
n_maps=0
while IFS=$'\t' read -r kind idx lineno value; do
    [ -n "$kind" ] || continue
    case "$kind" in
        err) die "$map_name:$lineno: $value" ;;
        ref) codex_ref="$value" ref_line="$lineno" ;;
        date) codex_ref_date="$value" ;;
        v2ref) v2_ref="$value" v2_line="$lineno" ;;
        v2repo) v2_repo="$value" ;;
        watch) watch+=("$value") ;;
        v2watch) v2watch+=("$value") ;;
        map)
            n_maps=$idx
            map_ours[idx]="" map_line[idx]="$lineno" map_ntheirs[idx]=0 map_sec[idx]="$value"
            ;;
        ours) map_ours[idx]="$value" ;;
        theirs)
            theirs_path+=("$value") theirs_map+=("$idx") theirs_line+=("$lineno")
            map_ntheirs[idx]=$((map_ntheirs[idx] + 1))
            ;;
        note) : ;;
    esac
done <<<"$parsed"

[ -n "$codex_ref" ] || die "$map_name: no codex_ref"
[[ "$codex_ref" =~ ^[0-9a-f]{40}$ ]] || die "$map_name:$ref_line: codex_ref must be a full 40-character commit SHA, got '$codex_ref'"
[ -n "$codex_ref_date" ] || die "$map_name: no codex_ref_date"
[[ "$codex_ref_date" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] || die "$map_name: codex_ref_date must look like YYYY-MM-DD, got '$codex_ref_date'"
n_ref_maps=0 n_v2_maps=0
for ((i = 1; i <= n_maps; i++)); do
    [ -n "${map_ours[i]}" ] || die "$map_name:${map_line[i]}: mapping has no ours"
    [ "${map_ntheirs[i]}" -gt 0 ] || die "$map_name:${map_line[i]}: mapping for ${map_ours[i]} has no theirs"
    [ -e "$map_dir/${map_ours[i]}" ] || die "$map_name:${map_line[i]}: ours path ${map_ours[i]} does not exist in $map_dir"
    if [ "${map_sec[i]}" = v2 ]; then n_v2_maps=$((n_v2_maps + 1)); else n_ref_maps=$((n_ref_maps + 1)); fi
done
[ "$n_ref_maps" -gt 0 ] || die "$map_name: no mappings"
if [ "$n_v2_maps" -gt 0 ] || [ ${#v2watch[@]} -gt 0 ]; then
    [ -n "$v2_ref" ] || die "$map_name: v2_mappings or v2_watch_paths given without a v2_ref"
fi
if [ -n "$v2_ref" ]; then
    [[ "$v2_ref" =~ ^[0-9a-f]{40}$ ]] || die "$map_name:$v2_line: v2_ref must be a full 40-character commit SHA, got '$v2_ref'"
    [ "$n_v2_maps" -gt 0 ] || die "$map_name:$v2_line: v2_ref given without v2_mappings"
fi

# Unique upstream paths per section ("ref" = codex_ref, "v2" = v2_ref), in map order, with the
# memoryd files that port each one.
uniq_sec=()
uniq_paths=()
uniq_ours=()
uniq_line=()
n_uniq_ref=0 n_uniq_v2=0
for ((k = 0; k < ${#theirs_path[@]}; k++)); do
    p="${theirs_path[k]}" o="${map_ours[${theirs_map[k]}]}" s="${map_sec[${theirs_map[k]}]}" found=-1
    for ((u = 0; u < ${#uniq_paths[@]}; u++)); do
        if [ "${uniq_paths[u]}" = "$p" ] && [ "${uniq_sec[u]}" = "$s" ]; then found=$u; break; fi
    done
    if [ "$found" -lt 0 ]; then
        uniq_sec+=("$s") uniq_paths+=("$p") uniq_ours+=("$o") uniq_line+=("${theirs_line[k]}")
        if [ "$s" = v2 ]; then n_uniq_v2=$((n_uniq_v2 + 1)); else n_uniq_ref=$((n_uniq_ref + 1)); fi
    else
        uniq_ours[found]="${uniq_ours[found]}, $o"
    fi
done

if [ "$list_map" = 1 ]; then
    for ((w = 0; w < ${#watch[@]}; w++)); do printf 'watch\t%s\n' "${watch[w]}"; done
    for ((k = 0; k < ${#theirs_path[@]}; k++)); do
        [ "${map_sec[${theirs_map[k]}]}" = v2 ] && continue
        printf 'map\t%s\t%s\n' "${map_ours[${theirs_map[k]}]}" "${theirs_path[k]}"
    done
    for ((w = 0; w < ${#v2watch[@]}; w++)); do printf 'v2watch\t%s\n' "${v2watch[w]}"; done
    for ((k = 0; k < ${#theirs_path[@]}; k++)); do
        [ "${map_sec[${theirs_map[k]}]}" = v2 ] || continue
        printf 'v2map\t%s\t%s\n' "${map_ours[${theirs_map[k]}]}" "${theirs_path[k]}"
    done
    exit 0
fi

counts="${n_ref_maps} mappings, ${n_uniq_ref} upstream files, ${#watch[@]} watch paths"
v2_counts=""
if [ -n "$v2_ref" ]; then
    v2_counts="${n_v2_maps} mappings, ${n_uniq_v2} upstream files, ${#v2watch[@]} watch paths"
    counts="$counts; v2 section at ${v2_ref:0:12}${v2_repo:+ of $v2_repo}: $v2_counts"
fi

if [ -z "$repo" ]; then
    [ "$check_map_only" = 1 ] || die "no Codex repository given (set CODEX_REPO=/path/to/codex or pass it as the first argument)"
    printf '%s: OK (%s; codex_ref %s of %s)\n' "$map_name" "$counts" "${codex_ref:0:12}" "$codex_ref_date"
    exit 0
fi

# ---- open the repository ------------------------------------------------------------------------

[ -d "$repo" ] || die "$repo: no such directory"
abs="$(cd "$repo" 2>/dev/null && pwd -P)" || die "$repo: cannot enter the directory"
if ! gd="$(git -C "$abs" rev-parse --absolute-git-dir 2>&1)"; then
    case "$gd" in
        *"dubious ownership"*) die "git refuses $repo: owned by another user (add it to safe.directory)" ;;
        *) die "$repo is not a git repository" ;;
    esac
fi
gd="$(cd "$gd" && pwd -P)" || die "$repo: cannot enter its git directory $gd"
if [ "$gd" = "$abs" ]; then
    repo_kind="bare"
    [ "$(git -C "$abs" rev-parse --is-bare-repository)" = true ] || repo_kind="git directory"
else
    top="$(git -C "$abs" rev-parse --show-toplevel 2>/dev/null)" || die "$repo is not a git repository"
    [ "$(cd "$top" && pwd -P)" = "$abs" ] || die "$repo is not a git repository (it lies inside the work tree of $top; pass that directory)"
    repo_kind="work tree"
fi
g() { git --git-dir="$gd" "$@"; }

g cat-file -e "${codex_ref}^{commit}" 2>/dev/null ||
    die "codex_ref ${codex_ref:0:12} is not in $repo (shallow clone or a fork without upstream history? fetch openai/codex main first)"

# The v2 section was read file by file at a commit a clone may not hold. Without it that section
# cannot be compared, and saying ALIGNED would be false: it is an error unless --skip-v2 asks to
# check the codex_ref section alone (the report then says the v2 section was not checked).
check_v2=0
if [ -n "$v2_ref" ]; then
    if g cat-file -e "${v2_ref}^{commit}" 2>/dev/null; then
        check_v2=1
    elif [ "$skip_v2" != 1 ]; then
        die "v2_ref ${v2_ref:0:12} (the v2 section, ${n_uniq_v2} upstream files read one by one${v2_repo:+ from $v2_repo}) is not in $repo; use a clone that holds it, or pass --skip-v2 to check the codex_ref section alone"
    fi
fi

# Every upstream path of a section must exist at its ref: one batch query per section.
# (A watch path that is a directory may be written with a trailing "/"; git resolves either form.)
check_paths_exist() {
    local sec="$1" ref="$2" label="$3" missing u w
    shift 3
    missing="$(
        {
            for ((u = 0; u < ${#uniq_paths[@]}; u++)); do
                if [ "${uniq_sec[u]}" = "$sec" ]; then printf '%s:%s\n' "$ref" "${uniq_paths[u]%/}"; fi
            done
            for w in "$@"; do printf '%s:%s\n' "$ref" "${w%/}"; done
        } | g cat-file --batch-check | awk '!found && / missing$/ { sub(/ missing$/, ""); sub(/^[0-9a-f]+:/, ""); print; found = 1 }'
    )" || die "git cat-file failed in $repo"
    [ -n "$missing" ] || return 0
    for ((u = 0; u < ${#uniq_paths[@]}; u++)); do
        if [ "${uniq_sec[u]}" = "$sec" ] && [ "${uniq_paths[u]%/}" = "$missing" ]; then
            die "$map_name:${uniq_line[u]}: theirs path $missing does not exist at $label ${ref:0:12}"
        fi
    done
    die "$map_name: watch path $missing does not exist at $label ${ref:0:12}"
}
check_paths_exist ref "$codex_ref" codex_ref ${watch[@]+"${watch[@]}"}
[ "$check_v2" = 0 ] || check_paths_exist v2 "$v2_ref" v2_ref ${v2watch[@]+"${v2watch[@]}"}

v2_note=""
[ -z "$v2_ref" ] || [ "$check_v2" = 1 ] ||
    v2_note="; v2 section NOT checked: v2_ref ${v2_ref:0:12} is not in this repository"

if [ "$check_map_only" = 1 ]; then
    printf '%s: OK (%s; codex_ref %s of %s; every upstream path exists there%s)\n' \
        "$map_name" "$counts" "${codex_ref:0:12}" "$codex_ref_date" \
        "$([ "$check_v2" = 1 ] && echo ' and at v2_ref')$v2_note"
    exit 0
fi

head_ref="${CODEX_HEAD:-HEAD}"
head="$(g rev-parse --verify --quiet "${head_ref}^{commit}")" || die "CODEX_HEAD=$head_ref: no such commit in $repo"

utc_date() { TZ=UTC g log -1 --date=format-local:%Y-%m-%d --format=%cd "$1"; }
subject() { g log -1 --format=%s "$1"; }
ref_date_real="$(utc_date "$codex_ref")"
head_date="$(utc_date "$head")"

# ---- report -------------------------------------------------------------------------------------

ancestry_warning() {
    local ref="$1" label="$2"
    if [ "$head" != "$ref" ] && ! g merge-base --is-ancestor "$ref" "$head"; then
        if g merge-base --is-ancestor "$head" "$ref"; then
            printf '  %swarning:%s HEAD is older than %s; update the checkout (git fetch) before trusting this report\n' "$YEL" "$OFF" "$label"
        else
            printf '  %swarning:%s %s is not an ancestor of HEAD; comparing the two trees anyway\n' "$YEL" "$OFF" "$label"
        fi
    fi
}

printf '%sCodex drift check%s\n' "$B" "$OFF"
printf '  map         %s (%s)\n' "$map" "$counts"
printf '  repository  %s (%s)\n' "$abs" "$repo_kind"
printf '  codex_ref   %s (%s) %s\n' "${codex_ref:0:12}" "$codex_ref_date" "$(subject "$codex_ref")"
if [ "$check_v2" = 1 ]; then
    printf '  v2_ref      %s (%s) %s\n' "${v2_ref:0:12}" "$(utc_date "$v2_ref")" "$(subject "$v2_ref")"
elif [ -n "$v2_ref" ]; then
    printf '  v2_ref      %s %sNOT CHECKED%s: not in this repository (--skip-v2)\n' "${v2_ref:0:12}" "$B$YEL" "$OFF"
fi
printf '  HEAD        %s (%s, %s) %s\n' "${head:0:12}" "$head_date" "$head_ref" "$(subject "$head")"
if [ "$ref_date_real" != "$codex_ref_date" ]; then
    printf '  %swarning:%s codex_ref_date %s differs from the commit date of codex_ref (%s UTC)\n' \
        "$YEL" "$OFF" "$codex_ref_date" "$ref_date_real"
fi
ancestry_warning "$codex_ref" codex_ref
[ "$check_v2" = 0 ] || ancestry_warning "$v2_ref" v2_ref
echo

indent() { sed "s/^/$1/"; }

# Follow a path that is missing at HEAD through the commits that renamed it; prints
# "renamed <new path> <commit>" lines per hop, then "deleted <commit>" or "unknown".
follow_move() {
    local cur="$1" ref="$2" hops=0 c target
    while [ "$hops" -lt 10 ]; do
        c="$(g log -1 --format=%H "$ref..$head" -- "$cur")"
        if [ -z "$c" ]; then echo "unknown"; return; fi
        target="$(g diff-tree -r -M --no-commit-id --name-status "$c^" "$c" |
            awk -F'\t' -v p="$cur" '!done && $1 ~ /^R/ && $2 == p { print $3; done = 1 }')"
        if [ -z "$target" ]; then echo "deleted $c"; return; fi
        printf 'renamed %s %s\n' "$c" "$target"
        if g cat-file -e "$head:$target" 2>/dev/null; then return; fi
        cur="$target" hops=$((hops + 1))
    done
    echo "unknown"
}

# Report one section against HEAD; adds to n_gone, n_changed and watch_changed_in.
n_gone=0 n_changed=0 watch_changed_in=""
report_section() {
    local sec="$1" ref="$2" label="$3" title u p present last what c new total
    shift 3
    local idxs=() gone=() changed=()
    for ((u = 0; u < ${#uniq_paths[@]}; u++)); do
        if [ "${uniq_sec[u]}" = "$sec" ]; then idxs+=("$u"); fi
    done
    if [ ${#idxs[@]} -gt 0 ]; then
        local at_head
        at_head="$(
            for u in "${idxs[@]}"; do printf '%s:%s\n' "$head" "${uniq_paths[u]%/}"; done |
                g cat-file --batch-check | awk '{ print ($NF == "missing" ? 0 : 1) }'
        )" || die "git cat-file failed in $repo"
        local k=0
        while read -r present; do
            u="${idxs[k]}"
            if [ "$present" = 0 ]; then
                gone+=("$u")
            elif ! g diff --quiet "$ref" "$head" -- "${uniq_paths[u]}"; then
                changed+=("$u")
            fi
            k=$((k + 1))
        done <<<"$at_head"
    fi
    title=""
    [ "$sec" = v2 ] && title=" [v2 section, since v2_ref]"

    if [ ${#gone[@]} -gt 0 ]; then
        printf '%sMoved or vanished upstream%s (mapped files that are not at HEAD)%s\n' "$B$RED" "$OFF" "$title"
        for u in "${gone[@]}"; do
            p="${uniq_paths[u]}"
            printf '  %s%s%s  %s(ported by %s)%s\n' "$B" "$p" "$OFF" "$DIM" "${uniq_ours[u]}" "$OFF"
            last="$p"
            while read -r what c new; do
                case "$what" in
                    renamed)
                        printf '    renamed to %s in %s %s\n' "$new" "$(g rev-parse --short=10 "$c")" "$(subject "$c")"
                        last="$new"
                        ;;
                    deleted)
                        printf '    deleted in %s %s\n' "$(g rev-parse --short=10 "$c")" "$(subject "$c")"
                        # Too rewritten for rename detection? A file of the same name added by that
                        # commit is the likely new home.
                        g diff-tree -r --no-commit-id --diff-filter=A --name-only "$c^" "$c" |
                            awk -v n="${last##*/}" '{ f = $0; sub(/.*\//, "", f) } f == n { print "    same name added in that commit: " $0 }'
                        ;;
                    unknown)
                        printf '    not at HEAD; git cannot tell where it went (git -C %s log --stat %s..%s -- %s)\n' \
                            "$abs" "${ref:0:12}" "${head:0:12}" "$p"
                        ;;
                esac
            done < <(follow_move "$p" "$ref")
            if [ "$last" != "$p" ]; then
                printf '    diffstat (with rename detection):\n'
                g diff -M --stat=100 "$ref" "$head" -- "$p" "$last" | indent '      '
            fi
        done
        echo
    fi

    if [ ${#changed[@]} -gt 0 ]; then
        printf '%sChanged upstream%s (mapped files)%s\n' "$B$YEL" "$OFF" "$title"
        for u in "${changed[@]}"; do
            p="${uniq_paths[u]}"
            printf '  %s%s%s  %s(ported by %s)%s\n' "$B" "$p" "$OFF" "$DIM" "${uniq_ours[u]}" "$OFF"
            total="$(g rev-list --count "$ref..$head" -- "$p")"
            printf '    commits (%s):\n' "$total"
            g log --oneline --no-decorate --abbrev=10 -n "$MAX_COMMITS" "$ref..$head" -- "$p" | indent '      '
            if [ "$total" -gt "$MAX_COMMITS" ]; then
                printf '      ... and %d more: git -C %s log --oneline %s..%s -- %s\n' \
                    "$((total - MAX_COMMITS))" "$abs" "${ref:0:12}" "${head:0:12}" "$p"
            fi
            printf '    diffstat:\n'
            g diff --stat=100 "$ref" "$head" -- "$p" | indent '      '
        done
        echo
    fi

    if [ $# -gt 0 ] && ! g diff --quiet "$ref" "$head" -- "$@"; then
        watch_changed_in="${watch_changed_in:+$watch_changed_in, }$label"
        printf '%sWatched paths%s (any change under them)%s\n' "$B$YEL" "$OFF" "$title"
        g diff --stat=100 "$ref" "$head" -- "$@" | indent '  '
        printf '  review: git -C %s log -p %s..%s -- <path>\n' "$abs" "${ref:0:12}" "${head:0:12}"
        echo
    fi
    n_gone=$((n_gone + ${#gone[@]})) n_changed=$((n_changed + ${#changed[@]}))
}

report_section ref "$codex_ref" codex_ref ${watch[@]+"${watch[@]}"}
[ "$check_v2" = 0 ] || report_section v2 "$v2_ref" v2_ref ${v2watch[@]+"${v2watch[@]}"}

n_checked=$n_uniq_ref n_watch=${#watch[@]}
if [ "$check_v2" = 1 ]; then n_checked=$((n_checked + n_uniq_v2)) n_watch=$((n_watch + ${#v2watch[@]})); fi

if [ "$n_gone" -eq 0 ] && [ "$n_changed" -eq 0 ] && [ -z "$watch_changed_in" ]; then
    if [ "$head" = "$codex_ref" ]; then
        how="HEAD is codex_ref"
    else
        how="$(g rev-list --count "$codex_ref..$head") upstream commits since codex_ref, none under them"
    fi
    printf '%sALIGNED%s: nothing changed under the %d mapped upstream files or the %d watch paths (%s%s).\n' \
        "$B$GRN" "$OFF" "$n_checked" "$n_watch" "$how" "$v2_note"
    exit 0
fi

printf '%sDRIFT%s: %d mapped upstream files moved or vanished, %d changed; watched paths %s%s.\n' \
    "$B$RED" "$OFF" "$n_gone" "$n_changed" \
    "$(if [ -z "$watch_changed_in" ]; then echo unchanged; elif [ "$check_v2" = 0 ]; then echo changed; else echo "changed (since $watch_changed_in)"; fi)" "$v2_note"
cat <<EOT
Next step: read each change (git -C $abs diff <ref> ${head:0:12} -- <path>) and port it to
the mapped memoryd file on purpose, or record why memoryd does not follow it in that mapping's note.
Point theirs entries of moved files at their new paths. Then set, in $map_name:
  codex_ref: $head
  codex_ref_date: $head_date
EOT
[ "$check_v2" = 0 ] || printf '  v2_ref: %s\n' "$head"
echo "and run this script again until it reports ALIGNED."
exit 1
