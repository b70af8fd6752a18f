#!/usr/bin/env bash
# Build ESP-IDF's documentation per chip to docutils XML with esp-docs.
#
# Why a script: the per-chip facts ({IDF_TARGET_*} values, `only::` blocks, the
# doxygen API reference) exist only in a real docs build, and that build wants
# a configured ESP-IDF CMake project. This script makes that build reproducible
# on Linux without Espressif's cross toolchain (a compiler stand-in that only
# configures and dumps macros) and on macOS with a normal ESP-IDF install.
# Design notes: docs/idf-docs-build.md.
#
# Written for bash 3.2 (macOS /bin/bash): no associative arrays, no `wait -n`.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly SCRIPT_DIR
readonly GIB_PER_BUILD_TENTHS=17 # ~1.7 GB peak memory per concurrent chip build
readonly CROSS_PREFIXES="riscv32-esp-elf xtensa-esp-elf xtensa-esp32-elf xtensa-esp32s2-elf xtensa-esp32s3-elf"
readonly CROSS_TOOLS="gcc g++ cc c++ cpp gcc-ar gcc-nm gcc-ranlib ar ranlib nm objcopy objdump readelf size strip as ld"
readonly DOCS_EXTRA_PACKAGES="linuxdoc sphinxcontrib-mermaid"
readonly MAX_STUB_ROUNDS=250

usage() {
    cat <<'EOF'
usage: IDF_PATH=/path/to/esp-idf build_idf_docs.sh [options] TARGET [TARGET...]

Builds ESP-IDF docs (English) for each TARGET to docutils XML in
$IDF_PATH/docs/_build/en/<target>/xml, running esp-docs
`build-docs -t <target> -l en --builders xml build`.

options:
  -j N                       chip builds to run at once (default: from cores and
                             memory, ~1.7 GB per build, at most one per chip)
  --work-dir DIR             this script's own build folder: Python venv,
                             compiler stand-in, logs (default: build/idf-docs
                             next to this script)
  --min-pages N              a target succeeds when at least N pages were
                             written (default 250)
  --stub-missing-submodules  opt-in for a clone without submodules: create
                             empty placeholders inside submodule folders that
                             are empty (never touching tracked files)
  --submodule PATH=GITDIR    check out the submodule PATH (as in .gitmodules)
                             at the commit the checkout records for it, as a
                             `git clone --shared` of the local repository
                             GITDIR; only into an empty folder; repeatable.
                             For submodules whose CMakeLists.txt refuses a
                             placeholder (e.g. components/mqtt/esp-mqtt in 5.x)
  --esp-docs-version VER     install esp-docs==VER in the docs venv (default:
                             the newest esp-docs from PyPI)
  --docs-packages SPECS      the docs packages to install instead of the
                             newest esp-docs (e.g. 'esp-docs~=1.1.0' for 4.4;
                             sources.yaml's docs_tooling per release)
  --python PY                interpreter for the docs venv (default: $PYTHON
                             or python3); one venv per interpreter, packages
                             and tree requirements, under WORK_DIR/venvs
  --sphinx-jobs N            Sphinx parallel read processes per chip
                             (default: cores / chip builds at once)
  --output-dir DIR           also copy each built chip's XML tree, with its
                             SOURCE.md, to DIR/<target> (replacing an earlier
                             copy made by this script)
  --write-standin DIR        only write the cross-compiler stand-in into DIR
                             and exit (for inspection and tests)
  --print-mbedtls-stub-targets
                             only print the library targets the mbedtls
                             placeholder would declare for $IDF_PATH and exit
  -h, --help                 show this help

TARGET is one of the chips listed in $IDF_PATH/docs/conf_common.py idf_targets.
Success is decided by the page count, not build-docs' exit status (which is
non-zero whenever a warning is new to ESP-IDF's known-warnings list). Each
built chip's xml folder gets a SOURCE.md naming the ESP-IDF version
(git describe), commit and esp-docs version.
EOF
}

die_usage() {
    echo "build_idf_docs.sh: error: $*" >&2
    echo "Run with --help for usage." >&2
    exit 2
}

die() {
    echo "build_idf_docs.sh: error: $*" >&2
    exit 1
}

note() {
    echo "build_idf_docs.sh: $*" >&2
}

# ---------------------------------------------------------------- stand-in --

# Writes the compiler stand-in into DIR: one script plus a symlink for every
# cross-tool name ESP-IDF's CMake and esp-docs' gen_defines look up.
write_standin() {
    local dir="$1" host_cc host_cxx prefix tool
    host_cc="$(command -v "${HOST_CC:-gcc}" || true)"
    host_cxx="$(command -v "${HOST_CXX:-g++}" || true)"
    [ -n "$host_cc" ] || die "host C compiler '${HOST_CC:-gcc}' not found (Debian: apt-get install gcc g++)"
    [ -n "$host_cxx" ] || die "host C++ compiler '${HOST_CXX:-g++}' not found (Debian: apt-get install g++)"
    mkdir -p "$dir"
    {
        echo '#!/usr/bin/env bash'
        echo "# Generated by build_idf_docs.sh: stand-in for an Espressif cross tool."
        echo "# It only serves CMake configuration and 'gcc -dM -E' macro dumps for the"
        echo "# docs build. It forwards to the host toolchain and never builds firmware."
        echo "HOST_CC='$host_cc'"
        echo "HOST_CXX='$host_cxx'"
        cat <<'STANDIN'
set -euo pipefail
self="$(basename "$0")"
triple="${self%%-elf-*}-elf"
tool="${self#"$triple"-}"

# Appends the arguments of one response file to `args`, split as GCC does
# (whitespace separates; quotes group; a backslash escapes any character),
# recursing into nested @files through add_arg.
expand_response_file() {
    local content word="" in_word=0 quote="" char i
    content="$(cat "$1"; echo .)"
    content="${content%.}"
    for ((i = 0; i < ${#content}; i++)); do
        char="${content:i:1}"
        if [ "$char" = "\\" ]; then
            i=$((i + 1))
            word+="${content:i:1}"
            in_word=1
        elif [ -n "$quote" ]; then
            if [ "$char" = "$quote" ]; then quote=""; else word+="$char"; fi
        else
            case "$char" in
                "'" | '"')
                    quote="$char"
                    in_word=1
                    ;;
                " " | $'\t' | $'\n' | $'\r')
                    [ "$in_word" = 1 ] && add_arg "$word"
                    word=""
                    in_word=0
                    ;;
                *)
                    word+="$char"
                    in_word=1
                    ;;
            esac
        fi
    done
    if [ "$in_word" = 1 ]; then add_arg "$word"; fi
}

add_arg() {
    case "$1" in
        @*)
            if [ -r "${1#@}" ]; then
                expand_response_file "${1#@}"
                return
            fi
            ;;
        -m* | -specs=* | --specs=*)
            return # target-only flags: host GCC rejects them
            ;;
    esac
    args+=("$1")
}

case "$tool" in
    gcc | cc | g++ | c++ | cpp) ;;
    *)
        host_tool="$(command -v "$tool" || true)"
        if [ -z "$host_tool" ]; then
            echo "$self (docs stand-in): host tool '$tool' not found" >&2
            exit 1
        fi
        exec "$host_tool" "$@"
        ;;
esac

args=()
for arg in "$@"; do
    if [ "$arg" = "-dumpmachine" ]; then
        echo "$triple"
        exit 0
    fi
    add_arg "$arg"
done

dumps_macros=0
for arg in ${args[@]+"${args[@]}"}; do
    case "$arg" in
        -dM) dumps_macros=1 ;;
        *.elf | *.bin)
            echo "$self (docs stand-in): refusing to produce firmware ($arg);" \
                "this stand-in only configures and dumps macros" >&2
            exit 1
            ;;
    esac
done
if [ "$dumps_macros" = 1 ]; then
    args=(-undef ${args[@]+"${args[@]}"}) # a bare-metal GCC defines no linux/unix
fi

case "$tool" in
    gcc | cc) exec "$HOST_CC" ${args[@]+"${args[@]}"} ;;
    g++ | c++) exec "$HOST_CXX" ${args[@]+"${args[@]}"} ;;
    cpp) exec "$HOST_CC" -E ${args[@]+"${args[@]}"} ;;
esac
STANDIN
    } > "$dir/cross-standin"
    chmod +x "$dir/cross-standin"
    for prefix in $CROSS_PREFIXES; do
        for tool in $CROSS_TOOLS; do
            ln -sf cross-standin "$dir/$prefix-$tool"
        done
    done
}

# ---------------------------------------------------------------- helpers --

# Prints the docs targets ESP-IDF itself declares (docs/conf_common.py).
idf_doc_targets() {
    sed -n "s/^idf_targets *= *\[\(.*\)\].*/\1/p" "$IDF_PATH/docs/conf_common.py" |
        tr -d "' " | tr ',' ' '
}

# Prints "major.minor" from esp_idf_version.h (idf-component-manager needs it).
idf_version() {
    local header="$IDF_PATH/components/esp_common/include/esp_idf_version.h" major minor
    major="$(sed -n 's/^#define ESP_IDF_VERSION_MAJOR *\([0-9][0-9]*\).*/\1/p' "$header")"
    minor="$(sed -n 's/^#define ESP_IDF_VERSION_MINOR *\([0-9][0-9]*\).*/\1/p' "$header")"
    if [ -z "$major" ] || [ -z "$minor" ]; then
        die "cannot read the ESP-IDF version from $header"
    fi
    echo "$major.$minor"
}

# The cross-compiler prefix ESP-IDF's toolchain file uses for a chip.
toolchain_prefix() {
    sed -n 's/^set(_CMAKE_TOOLCHAIN_PREFIX \([^)]*\)).*/\1/p' \
        "$IDF_PATH/tools/cmake/toolchain-$1.cmake"
}

cpu_count() {
    nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 1
}

# Memory available for builds, in tenths of a GiB.
memory_tenths_gib() {
    local kib bytes
    kib="$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo 2>/dev/null || true)"
    if [ -n "$kib" ]; then
        echo $((kib * 10 / 1048576))
        return
    fi
    bytes="$(sysctl -n hw.memsize 2>/dev/null || echo 0)"
    echo $((bytes * 10 / 1073741824))
}

default_jobs() {
    local by_cpu by_memory
    by_cpu="$(cpu_count)"
    by_memory=$(($(memory_tenths_gib) / GIB_PER_BUILD_TENTHS))
    local jobs=$((by_cpu < by_memory ? by_cpu : by_memory))
    echo $((jobs < 1 ? 1 : jobs))
}

# Counts Sphinx pages: XML files whose root element is <document> (doxygen's
# own XML shares the folder and must not count).
count_pages() {
    local xml_dir="$1"
    [ -d "$xml_dir" ] || {
        echo 0
        return
    }
    find "$xml_dir" -name '*.xml' -type f -print0 |
        xargs -0 grep -l -m1 -E '^<document[ >]' 2>/dev/null | wc -l | tr -d ' '
}

check_build_tools() {
    local missing="" tool
    for tool in doxygen cmake ninja git; do
        command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
    done
    if [ -n "$missing" ]; then
        die "missing tools:$missing
  Debian/Ubuntu: sudo apt-get install doxygen cmake ninja-build git
  macOS:         brew install doxygen cmake ninja git"
    fi
}

# Prints the .gitmodules paths that are not checked out: folder absent or
# empty, or reported uninitialised ('-') by git and not a git checkout of its
# own. Git alone is not enough (a damaged index lists no submodules at all),
# emptiness alone neither (this script's placeholders make a folder non-empty).
empty_submodules() {
    local path uninitialised=""
    [ -f "$IDF_PATH/.gitmodules" ] || return 0
    if git -C "$IDF_PATH" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        uninitialised=" $(git -C "$IDF_PATH" submodule status 2>/dev/null |
            sed -n 's/^-[0-9a-f]* \([^ ]*\).*/\1/p' | tr '\n' ' ')"
    fi
    git config -f "$IDF_PATH/.gitmodules" --get-regexp '^submodule\..*\.path$' |
        while read -r _ path; do
            if [ ! -d "$IDF_PATH/$path" ] || [ -z "$(ls -A "$IDF_PATH/$path")" ]; then
                echo "$path"
                continue
            fi
            # a checkout of its own (e.g. from --submodule) is there, even
            # when the superproject never ran `git submodule init`
            [ -e "$IDF_PATH/$path/.git" ] && continue
            case "$uninitialised" in
                *" $path "*) echo "$path" ;;
            esac
        done
}

# Refuses a second run on the same work dir: both would rewrite the stand-in,
# the venv and the logs under the other's feet.
take_work_dir_lock() {
    local lock="$WORK_DIR/.lock"
    if ! mkdir "$lock" 2>/dev/null; then
        local owner
        owner="$(cat "$lock/pid" 2>/dev/null || true)"
        if [ -n "$owner" ] && kill -0 "$owner" 2>/dev/null; then
            die "another build_idf_docs.sh (pid $owner) is using $WORK_DIR; wait for it or pass another --work-dir"
        fi
        note "removing a stale lock left by pid ${owner:-unknown} in $WORK_DIR"
        rm -rf "$lock"
        mkdir "$lock"
    fi
    echo $$ > "$lock/pid"
    trap 'rm -rf "$WORK_DIR/.lock"' EXIT
}

# ------------------------------------------------------------ environment --

# The tree's Python requirements: tools/requirements/requirements.core.txt
# (5.0 and later) or the top-level requirements.txt (4.x), without the
# Windows-only `file://` line that pip cannot resolve outside Windows.
tree_requirements() {
    local file="$IDF_PATH/tools/requirements/requirements.core.txt"
    [ -f "$file" ] || file="$IDF_PATH/requirements.txt"
    grep -v -E '^[[:space:]]*file:' "$file"
}

# Sets VENV, the docs venv for this tooling set: one per (interpreter,
# docs packages, tree requirements), so releases that pin different esp-docs
# versions each keep theirs and releases that agree share one.
choose_venv() {
    local stamp
    stamp="$(
        {
            echo "$PYTHON_BIN"
            echo "$DOCS_PACKAGES"
            tree_requirements
        } | cksum | cut -d' ' -f1
    )"
    VENV="$WORK_DIR/venvs/$stamp"
}

# Creates the docs venv (docs packages + the tree's requirements) unless it
# exists complete; the project's own virtualenv is never used. A failed
# install names the package pip could not install and its error.
ensure_venv() {
    [ -x "$VENV/bin/build-docs" ] && [ -f "$VENV/.complete" ] && return
    command -v "$PYTHON_BIN" >/dev/null 2>&1 || die "$PYTHON_BIN not found (Debian: apt-get install python3 python3-venv; pyenv: pyenv install 3.11; or pass --python)"
    note "creating the docs Python environment in $VENV ($("$PYTHON_BIN" --version 2>&1), $DOCS_PACKAGES; log: $WORK_DIR/logs/venv.log)"
    mkdir -p "$WORK_DIR/logs" "$WORK_DIR/venvs"
    tree_requirements > "$WORK_DIR/requirements.txt"
    # shellcheck disable=SC2086 # DOCS_PACKAGES is a space-separated package list
    if ! {
        "$PYTHON_BIN" -m venv --clear "$VENV" &&
            "$VENV/bin/python" -m pip install --upgrade pip &&
            "$VENV/bin/python" -m pip install $DOCS_PACKAGES -r "$WORK_DIR/requirements.txt"
    } > "$WORK_DIR/logs/venv.log" 2>&1; then
        die "the docs tooling ($DOCS_PACKAGES + the tree's requirements) does not install with $("$PYTHON_BIN" --version 2>&1):
$(grep -E '^(ERROR|error):|Failed to build|No matching distribution|Could not find a version' "$WORK_DIR/logs/venv.log" | head -n 5)
(full log: $WORK_DIR/logs/venv.log)"
    fi
    touch "$VENV/.complete"
}

# Takes the caller's virtualenv (e.g. the project's .venv under `uv run`) off
# PATH before any Python runs, so the docs venv is built from and used with a
# plain interpreter and the two environments never mix.
drop_caller_virtualenv() {
    local clean_path="" entry old_ifs="$IFS"
    IFS=:
    for entry in $PATH; do
        if [ -n "${VIRTUAL_ENV:-}" ] && [ "$entry" = "$VIRTUAL_ENV/bin" ]; then
            continue
        fi
        clean_path="${clean_path:+$clean_path:}$entry"
    done
    IFS="$old_ifs"
    export PATH="$clean_path"
    unset VIRTUAL_ENV PYTHONHOME PYTHONPATH
}

# Finds the real cross compiler for a prefix: on PATH, or in an ESP-IDF tools
# install (install.sh puts it under $IDF_TOOLS_PATH or ~/.espressif).
find_real_compiler() {
    local prefix="$1" found tools_root
    found="$(command -v "${prefix}gcc" 2>/dev/null || true)"
    if [ -n "$found" ] && [ "$(dirname "$found")" != "$STANDIN_DIR" ]; then
        echo "$found"
        return
    fi
    tools_root="${USER_IDF_TOOLS_PATH:-$HOME/.espressif}/tools"
    [ -d "$tools_root" ] || return 0
    find "$tools_root" -path "*/bin/${prefix}gcc" \( -type f -o -type l \) 2>/dev/null | sort | tail -n 1
}

# Sets the environment export.sh would, with every tool location inside the
# work dir, and decides per chip prefix between the real toolchain and the
# stand-in.
setup_environment() {
    local target prefix real needs_standin=0 real_dirs=""
    for target in $TARGETS; do
        prefix="$(toolchain_prefix "$target")"
        real="$(find_real_compiler "$prefix")"
        if [ -n "$real" ]; then
            note "$target: using the real cross compiler $real"
            real_dirs="$real_dirs:$(dirname "$real")"
        else
            needs_standin=1
        fi
    done
    if [ "$needs_standin" = 1 ]; then
        write_standin "$STANDIN_DIR"
        note "no Espressif cross compiler found for some targets: using the configure-only stand-in in $STANDIN_DIR"
    fi

    export IDF_PATH
    export IDF_TOOLS_PATH="$WORK_DIR/idf-tools"
    export IDF_PYTHON_ENV_PATH="$VENV"
    export IDF_PYTHON_CHECK_CONSTRAINTS=no
    export IDF_MAINTAINER=1
    export IDF_SKIP_CHECK_SUBMODULES=1
    ESP_IDF_VERSION="$(idf_version)"
    export ESP_IDF_VERSION
    local standin_entry=""
    [ "$needs_standin" = 1 ] && standin_entry=":$STANDIN_DIR"
    export PATH="$VENV/bin${real_dirs}${standin_entry}:$PATH"
    mkdir -p "$IDF_TOOLS_PATH"
}

# ------------------------------------------------------------- submodules --

# The commit HEAD of the ESP-IDF checkout records for a submodule PATH
# (`git ls-tree HEAD PATH`), or nothing when it records none.
submodule_commit() {
    git -C "$IDF_PATH" ls-tree HEAD -- "$1" 2>/dev/null |
        awk -v path="$1" '$2 == "commit" && $4 == path {print $3}'
}

# The URL .gitmodules gives for a submodule PATH, as written there.
submodule_url() {
    local name
    name="$(git config -f "$IDF_PATH/.gitmodules" --get-regexp '^submodule\..*\.path$' |
        awk -v path="$1" '$2 == path {print $1}' | head -n 1)"
    [ -n "$name" ] || return 0
    git config -f "$IDF_PATH/.gitmodules" --get "${name%.path}.url" || true
}

# "URL" plus, for a relative one, where it points: ESP-IDF's .gitmodules
# says its relative URLs are meant against its GitHub repository.
submodule_origin() {
    local url
    url="$(submodule_url "$1")"
    case "$url" in
        "") echo "(no url in .gitmodules)" ;;
        ../../*) echo "$url (https://github.com/${url#../../})" ;;
        *) echo "$url" ;;
    esac
}

# One indented paragraph per submodule PATH: its commit and its origin.
describe_submodules() {
    local path commit
    for path in "$@"; do
        commit="$(submodule_commit "$path")"
        echo "  $path at commit ${commit:-unknown (HEAD records no gitlink here)}"
        echo "    from $(submodule_origin "$path")"
    done
}

# Checks every --submodule PATH=GITDIR before anything is written: PATH is a
# submodule of the checkout whose folder is empty (or already holds exactly the
# recorded commit), GITDIR is a git repository holding the recorded commit.
check_submodule_sources() {
    local spec path gitdir commit valid
    [ -n "${SUBMODULE_SOURCES// /}" ] || return 0
    command -v git >/dev/null 2>&1 || die "--submodule needs git on PATH"
    valid="$(git config -f "$IDF_PATH/.gitmodules" --get-regexp '^submodule\..*\.path$' 2>/dev/null |
        awk '{print $2}' | tr '\n' ' ')"
    for spec in $SUBMODULE_SOURCES; do
        path="${spec%%=*}"
        gitdir="${spec#*=}"
        case " $valid " in
            *" $path "*) ;;
            *) die_usage "--submodule $spec: '$path' is not a submodule path in $IDF_PATH/.gitmodules; valid paths:
$(echo "$valid" | tr ' ' '\n' | sed '/^$/d; s/^/  /')" ;;
        esac
        commit="$(submodule_commit "$path")"
        [ -n "$commit" ] || die "--submodule $spec: HEAD of $IDF_PATH records no commit for $path (git ls-tree HEAD $path shows no gitlink)"
        git -C "$gitdir" rev-parse --git-dir >/dev/null 2>&1 ||
            die "--submodule $spec: '$gitdir' is not a git repository; give a clone of $(submodule_origin "$path")"
        if ! git -C "$gitdir" cat-file -e "$commit^{commit}" 2>/dev/null; then
            die "--submodule $spec: $gitdir does not have commit $commit, which $IDF_PATH ($(git -C "$IDF_PATH" describe --tags --always 2>/dev/null || echo HEAD)) records for $path.
  Fetch it into that repository from $(submodule_origin "$path"), or give another clone."
        fi
        if [ -d "$IDF_PATH/$path" ] && [ -n "$(ls -A "$IDF_PATH/$path")" ]; then
            if [ "$(git -C "$IDF_PATH/$path" rev-parse --show-toplevel 2>/dev/null)" = "$IDF_PATH/$path" ] &&
                [ "$(git -C "$IDF_PATH/$path" rev-parse HEAD 2>/dev/null)" = "$commit" ]; then
                continue # already checked out at the recorded commit: nothing to do
            fi
            die "--submodule $spec: $IDF_PATH/$path is not empty and is not a checkout of $commit; it is left alone (empty it or drop this option)"
        fi
    done
}

# Checks out each --submodule at the commit the ESP-IDF checkout records, as a
# `git clone --shared` of GITDIR (objects borrowed, nothing copied), only into
# an empty folder. Not recursive: a submodule's own submodules are not fetched.
supply_submodules() {
    local spec path gitdir commit dest
    [ -n "${SUBMODULE_SOURCES// /}" ] || return 0
    for spec in $SUBMODULE_SOURCES; do
        path="${spec%%=*}"
        gitdir="$(cd "${spec#*=}" && pwd)"
        commit="$(submodule_commit "$path")"
        dest="$IDF_PATH/$path"
        if [ -d "$dest" ] && [ -n "$(ls -A "$dest")" ]; then
            note "$path: already checked out at $commit"
            continue
        fi
        note "$path: checking out $commit from $gitdir"
        mkdir -p "$dest"
        git clone -q --shared --no-checkout "$gitdir" "$dest" ||
            die "$path: git clone --shared $gitdir failed"
        git -C "$dest" -c advice.detachedHead=false checkout -q --detach "$commit" ||
            die "$path: checking out $commit in $dest failed"
    done
}

# Prints the not-checked-out submodules a failed configure log points at: the
# ones inside the folder of a CMake file that stopped with an error (e.g.
# components/mqtt/CMakeLists.txt refuses to go on without
# esp-mqtt/CMakeLists.txt), or holding that file. The log is read as one line:
# errors from ESP-IDF's nested CMake runs come indented and wrapped.
needed_submodules_from_log() {
    local file rel dir sub
    tr '\n' ' ' < "$1" | grep -o -E 'CMake Error at [^ ]+:[0-9]+' |
        sed 's/^CMake Error at //; s/:[0-9]*$//' | sort -u |
        while read -r file; do
            case "$file" in
                "$IDF_PATH"/*) rel="${file#"$IDF_PATH"/}" ;;
                *) continue ;;
            esac
            dir="$(dirname "$rel")"
            for sub in $EMPTY_SUBMODULES; do
                case "$sub/" in
                    "$dir"/*) echo "$sub" ;;
                esac
                case "$rel" in
                    "$sub"/*) echo "$sub" ;;
                esac
            done
        done | sort -u
}

# ------------------------------------------------------- submodule stubs --

# Prints the library targets the tree's components/mbedtls/CMakeLists.txt
# expects the mbedtls submodule to define, read from that file itself, so each
# release gets its own list: mbedtls 4 / tf-psa-crypto (ESP-IDF 6) uses
# `mbedtls mbedx509 tfpsacrypto builtin everest p256-m extras platform
# utilities`, mbedtls 3 (ESP-IDF 5.x) `mbedtls mbedcrypto mbedx509 everest
# p256m`. A name counts when the file lists it in a `mbedtls_*targets`
# variable or applies a target command to it (get_target_property,
# set_property(TARGET ...), target_*, set_target_properties, add_dependencies,
# ALIAS); names with `${`, `::` and targets the file creates itself
# (add_library, add_custom_target, add_executable) do not.
scan_mbedtls_targets() {
    "${PYTHON:-python3}" - "$1" <<'PY'
import re
import sys

text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
text = re.sub(r"#\[(=*)\[.*?\]\1\]", " ", text, flags=re.S)  # bracket comments
text = re.sub(r"#[^\n]*", " ", text)  # line comments
calls = re.findall(r"\b(\w+)\s*\(((?:[^()]|\([^()]*\))*)\)", text)
FIRST_ARG = {
    "target_sources", "target_link_libraries", "target_compile_definitions",
    "target_compile_options", "target_include_directories", "target_link_options",
    "target_compile_features", "set_target_properties",
}
CREATES = {"add_library", "add_custom_target", "add_executable"}
used: list[str] = []
created: set[str] = set()
for name, raw in calls:
    name = name.lower()
    args = raw.split()
    if not args:
        continue
    if name == "set" and re.fullmatch(r"mbedtls_\w*targets", args[0]):
        used += args[1:]
    elif name == "list" and len(args) > 2 and args[0] == "APPEND" and re.fullmatch(r"mbedtls_\w*targets", args[1]):
        used += args[2:]
    elif name == "get_target_property" and len(args) > 1:
        used.append(args[1])
    elif name == "set_property" and args[0] == "TARGET":
        for arg in args[1:]:
            if arg in ("APPEND", "APPEND_STRING", "PROPERTY"):
                break
            used.append(arg)
    elif name in FIRST_ARG:
        used.append(args[0])
    elif name == "add_dependencies":
        used += args
    if name in CREATES:
        created.add(args[0])
        if name == "add_library" and len(args) > 2 and args[1] == "ALIAS":
            used.append(args[2])
seen: list[str] = []
for target in used:
    if "$" in target or "::" in target or target in created or target in seen:
        continue
    if re.fullmatch(r"[A-Za-z0-9_.+-]+", target):
        seen.append(target)
print(" ".join(seen))
PY
}

mbedtls_stub_targets() {
    local cmakelists="$IDF_PATH/components/mbedtls/CMakeLists.txt" targets
    [ -f "$cmakelists" ] || die "no $cmakelists: cannot tell which mbedtls targets to declare"
    targets="$(scan_mbedtls_targets "$cmakelists")" || die "reading the mbedtls targets from $cmakelists failed"
    [ -n "$targets" ] || die "found no mbedtls library targets in $cmakelists; the placeholder for components/mbedtls/mbedtls cannot be written"
    echo "$targets"
}

# Writes the stub mbedtls CMakeLists.txt: components/mbedtls/CMakeLists.txt
# links and configures library targets which the submodule defines.
write_mbedtls_stub() {
    local file="$IDF_PATH/components/mbedtls/mbedtls/CMakeLists.txt" lib targets
    inside_empty_submodule components/mbedtls/mbedtls/CMakeLists.txt || return 0
    [ -e "$file" ] && return 0
    targets="$(mbedtls_stub_targets)"
    note "mbedtls placeholder declares the targets: $targets"
    {
        echo "# Placeholder written by build_idf_docs.sh --stub-missing-submodules."
        echo "# The real file comes with: git submodule update --init components/mbedtls/mbedtls"
        echo "# Static libraries from one empty source: configured for the docs, never built."
        # shellcheck disable=SC2016 # CMake syntax, written verbatim
        echo 'file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/placeholder.c" "")'
        for lib in $targets; do
            echo "add_library($lib STATIC \"\${CMAKE_CURRENT_BINARY_DIR}/placeholder.c\")"
        done
        echo "function(set_config_files_compile_definitions)"
        echo "endfunction()"
    } > "$file"
    echo "$file" >> "$STUB_LOG"
}

# True when PATH (relative to IDF_PATH) lies inside one of the submodule
# folders that were empty when the run started.
inside_empty_submodule() {
    local path="$1" sub
    for sub in $EMPTY_SUBMODULES; do
        case "$path" in
            "$sub"/*) return 0 ;;
        esac
    done
    return 1
}

# Prints "<path relative to IDF_PATH> dir|file" for each path a failed CMake
# configure log says is missing, inside the not-checked-out submodules given.
# CMake names only the first missing source of a target per run, and only one
# missing include folder per configure, so for each one the component's CMake
# files are also scanned for the other paths of that kind that point into the
# same submodule: one configure round per component rather than one per path.
# With --seed instead of a log, prints the folders every such submodule's
# component names inside it (created before the first configure: the include
# folders of lwip, tlsf, unity... each cost a round of their own otherwise).
missing_paths_from_log() {
    # shellcheck disable=SC2086 # one argument per submodule path
    "$VENV/bin/python" - "$1" "$IDF_PATH" $EMPTY_SUBMODULES <<'PY'
import re
import sys
from pathlib import Path

log_arg, idf = sys.argv[1], Path(sys.argv[2])
submodules = [idf / s for s in sys.argv[3:]]
patterns = [
    (r"Include directory '([^']+)' is not a directory", "dir"),
    (r'given source "([^"]+)" which is not a directory', "dir"),
    (r"Cannot find source file: (\S+)", "file"),
    (r"include could not find requested file: (\S+)", "file"),
    (r"file (\S+) does not exist", "file"),
]
SOURCE_TOKEN = re.compile(r"[\w./+-]+\.(?:c|cc|cpp|S|s|h)\b")
# a CMake word: split at blanks, parentheses and quotes; the component-dir prefixes are dropped
# and any other variable disqualifies the word
WORD_SEPARATORS = re.compile(r'[\s()"]+')
DIR_PREFIX = re.compile(r"^\$\{(?:COMPONENT_DIR|CMAKE_CURRENT_SOURCE_DIR|CMAKE_CURRENT_LIST_DIR)\}/")
RELATIVE_PATH = re.compile(r"[\w.+-]+(?:/[\w.+-]+)*/?")


def submodule_of(path: Path) -> Path | None:
    return next((s for s in submodules if s == path or s in path.parents), None)


def component_cmake_files(submodule: Path) -> list[Path]:
    """The CMake files of the component that holds ``submodule``, outside the submodule."""
    parts = submodule.relative_to(idf).parts
    component_dir = idf.joinpath(*parts[:2]) if parts[0] == "components" else submodule.parent
    files = [*component_dir.rglob("CMakeLists.txt"), *component_dir.rglob("*.cmake")]
    return [f for f in files if submodule not in f.parents]


def named_files(submodule: Path) -> set[Path]:
    """Source files the component's CMake files name inside ``submodule``."""
    named = set()
    for cmake_file in component_cmake_files(submodule):
        for token in SOURCE_TOKEN.findall(cmake_file.read_text(errors="replace")):
            named.add((cmake_file.parent / token.lstrip("/")).resolve())
    return {path for path in named if submodule in path.parents}


def named_folders(submodule: Path) -> set[Path]:
    """Folder paths (quoted or bare, no file extension) the component's CMake files name inside
    ``submodule``."""
    named = set()
    for cmake_file in component_cmake_files(submodule):
        for word in WORD_SEPARATORS.split(cmake_file.read_text(errors="replace")):
            word = DIR_PREFIX.sub("", word)
            if RELATIVE_PATH.fullmatch(word):
                named.add((cmake_file.parent / word.rstrip("/")).resolve())
    return {path for path in named if submodule in path.parents and "." not in path.name}


found: dict[Path, str] = {}
if log_arg == "--seed":
    for submodule in submodules:
        for path in named_folders(submodule):
            found[path] = "dir"
else:
    text = re.sub(r"\s*\n\s*", " ", Path(log_arg).read_text(encoding="utf-8", errors="replace"))
    for pattern, kind in patterns:
        for raw in re.findall(pattern, text):
            path = Path(raw)
            if path.is_absolute() and submodule_of(path):
                found[path] = kind
    siblings = {"file": named_files, "dir": named_folders}
    for kind, named in siblings.items():
        for submodule in {submodule_of(path) for path, k in found.items() if k == kind}:
            for path in named(submodule):
                found.setdefault(path, kind)

for path, kind in sorted(found.items()):
    if not path.exists():
        print(path.relative_to(idf), kind)
PY
}

# Creates the placeholders LISTING names ("<path> dir|file" lines from
# missing_paths_from_log), only inside initially empty submodules and never over
# an existing path; sets CREATED to their number.
create_placeholders() {
    local path kind
    CREATED=0
    while read -r path kind; do
        [ -n "$path" ] || continue
        inside_empty_submodule "$path" || continue
        [ -e "$IDF_PATH/$path" ] && continue
        if [ "$kind" = dir ]; then
            mkdir -p "$IDF_PATH/$path"
        else
            mkdir -p "$(dirname "$IDF_PATH/$path")"
            : > "$IDF_PATH/$path"
        fi
        echo "$IDF_PATH/$path" >> "$STUB_LOG"
        CREATED=$((CREATED + 1))
    done <<EOF
$1
EOF
}

# Re-runs the dummy-project configure (as esp-docs does) and creates the empty
# placeholders its errors ask for, only inside initially empty submodules.
stub_submodules_for_target() {
    local target="$1"
    local probe="$WORK_DIR/stub-probe/$target" round log project
    local -a action
    project="$("$VENV/bin/python" -c 'import esp_docs.idf_extensions.build_system as m; print(m.project_path)')"
    log="$WORK_DIR/logs/stub-probe-$target.log"
    rm -rf "$probe"
    mkdir -p "$probe"
    for round in $(seq 1 "$MAX_STUB_ROUNDS"); do
        # later rounds keep the CMake cache, so compiler detection is not redone
        action=(reconfigure)
        if [ "$round" = 1 ]; then action=(--preview set-target "$target"); fi
        if IDF_DOC_BUILD=y "$VENV/bin/python" "$IDF_PATH/tools/idf.py" -B "$probe/build" -C "$project" \
            -D "SDKCONFIG=$probe/sdkconfig" "${action[@]}" > "$log" 2>&1; then
            note "$target: CMake configure succeeds after $((round - 1)) placeholder rounds"
            rm -rf "$probe"
            return
        fi
        create_placeholders "$(missing_paths_from_log "$log")"
        if [ "$CREATED" = 0 ]; then
            local needed
            needed="$(needed_submodules_from_log "$log" | tr '\n' ' ')"
            if [ -n "${needed// /}" ]; then
                # shellcheck disable=SC2086 # one argument per submodule path
                die "$target: CMake configure stops in a component that needs the real contents
of a submodule (an empty placeholder does not satisfy its CMakeLists.txt):
$(describe_submodules $needed)
Supply each from a local clone of that repository (it must hold the commit):
$(for sub in $needed; do echo "  --submodule $sub=/path/to/clone"; done)
or, with network: git -C \"$IDF_PATH\" submodule update --init <path>
See $log"
            fi
            die "$target: CMake configure of the dummy project fails for a reason placeholders cannot fix; see $log"
        fi
        note "$target: configure round $round: created $CREATED placeholder(s)"
    done
    die "$target: CMake configure still fails after $MAX_STUB_ROUNDS placeholder rounds; see $log"
}

# Fails early, before anything is installed, when submodules are missing and
# the user has not opted in to placeholders.
require_submodules_or_opt_in() {
    EMPTY_SUBMODULES="$(empty_submodules | tr '\n' ' ')"
    [ -n "${EMPTY_SUBMODULES// /}" ] || return 0
    [ "$STUB_SUBMODULES" = 1 ] && return 0
    die "these git submodules of $IDF_PATH are not checked out:
$(echo "$EMPTY_SUBMODULES" | tr ' ' '\n' | sed '/^$/d; s/^/  /')
ESP-IDF's CMake configure needs them. Fetch them with:
  git -C \"$IDF_PATH\" submodule update --init --recursive
or, with no network, re-run with --stub-missing-submodules to create empty
placeholders inside those folders (docs content never comes from a submodule)."
}

stub_missing_submodules() {
    [ -n "${EMPTY_SUBMODULES// /}" ] || return 0
    STUB_LOG="$WORK_DIR/stubbed-paths.txt"
    cat >&2 <<BANNER
************************************************************************
build_idf_docs.sh: --stub-missing-submodules: creating EMPTY PLACEHOLDER
files and folders inside the submodules of $IDF_PATH
that are not checked out. Tracked files are never touched. Every created
path is listed in
  $STUB_LOG
git status does not show them. Remove them before building firmware:
  while read -r p; do rm -rf "\$p"; done < "$STUB_LOG"; rm "$STUB_LOG"
then fetch the real submodules with 'git submodule update --init'.
************************************************************************
BANNER
    write_mbedtls_stub
    create_placeholders "$(missing_paths_from_log --seed)"
    note "created $CREATED placeholder folder(s) the components' CMake files name inside empty submodules"
    local target
    for target in $TARGETS; do
        stub_submodules_for_target "$target"
    done
}

# ------------------------------------------------------------------ build --

build_target() {
    local target="$1"
    cd "$IDF_PATH/docs"
    # pages left by an earlier build would be counted as written by this one
    rm -rf "_build/en/$target/xml"
    "$VENV/bin/python" -u -c "$BUILD_DOCS_LAUNCHER" "$SPHINX_JOBS" -t "$target" -l en --builders xml build 2>&1 |
        "$VENV/bin/python" -u -c "$PHASE_TIMER" "$WORK_DIR/logs/$target.phases"
    return "${PIPESTATUS[0]}"
}

# Runs esp-docs' build-docs with Sphinx's `-j` set to argv[1]: build-docs
# forces `-j 1` on the sphinx-build it starts, so the chip's Sphinx read could
# not use a second core. The pool of chip builds is forked, so the patch
# reaches it. sphinx-build starts from SPHINX_MAIN, which makes the extensions a
# parallel read needs fit for it and gives breathe an indexed search (see there).
readonly BUILD_DOCS_LAUNCHER='
import subprocess
import sys

from esp_docs import build_docs

jobs = sys.argv.pop(1)
real_popen = subprocess.Popen
SPHINX_MAIN = """
import sys

from sphinx.application import Sphinx
from sphinx.domains import Domain
from sphinx.registry import SphinxComponentRegistry
from sphinx.util import logging

# esp-docs 2.6 add_warnings returns nothing from setup(), and Sphinx then reads serially whatever
# -j says ("does not declare if it is safe for parallel reading"). It only prepends a configured
# warning to the source of the page being read, so it is safe: sphinx-build runs with that said.
try:
    from esp_docs.generic_extensions import add_warnings
except ImportError:
    add_warnings = None
if add_warnings is not None:
    undeclared_setup = add_warnings.setup

    def declared_setup(app):
        return undeclared_setup(app) or {"parallel_read_safe": True, "parallel_write_safe": True}

    add_warnings.setup = declared_setup

# sphinx_selective_exclude.eager_only (in every esp-docs build) decides each only:: block while a
# page is read and marks a kept block with the expression "TRUE", adding the tag "TRUE" to the tags
# of the process reading. The writer keeps a block only if "TRUE" is a tag of the main process: in a
# serial read the first only:: block put it there, in a parallel read only the reader processes had
# it, and every kept block became an empty comment. The main process gets the tag up front.
try:
    import sphinx.directives.other  # eager_only subclasses its Only without importing it
    from sphinx_selective_exclude import eager_only
except ImportError:
    eager_only = None
if eager_only is not None:
    eager_setup = eager_only.setup

    def eager_setup_with_true_tag(app):
        app.connect("builder-inited", lambda app: app.tags.add("TRUE"))
        return eager_setup(app)

    eager_only.setup = eager_setup_with_true_tag


# A parallel read hands the domain data of each reader process to the main process through
# Domain.merge_domaindata, which the Sphinx base class leaves unimplemented (NotImplementedError).
# The tools/cmakev2 extension of ESP-IDF v6.0 declares itself parallel-read safe, but its
# CMakeV2Domain implements neither merge_domaindata nor clear_doc. Its one data key, "xrefs", maps a
# CMake name to (docname, label id), written by the page whose cmakev2 directive declares the name,
# so the entries of the pages a process read are what it adds.
def merge_xrefs(domain, docnames, otherdata):
    for name, (docname, labelid) in otherdata["xrefs"].items():
        if docname in docnames:
            domain.data["xrefs"][name] = (docname, labelid)


def clear_xrefs(domain, docname):
    for name, (owner, _labelid) in list(domain.data["xrefs"].items()):
        if owner == docname:
            del domain.data["xrefs"][name]


# domain class -> (the data keys it was checked with, merge_domaindata, clear_doc)
DOMAIN_MERGES = {
    "esp_docs_cmakev2_extension.CMakeV2Domain": ({"xrefs"}, merge_xrefs, clear_xrefs),
}
logger = logging.getLogger("build_idf_docs")
real_add_domain = SphinxComponentRegistry.add_domain
real_parallel_allowed = Sphinx.is_parallel_allowed


def add_domain(registry, domain, *args, **kwargs):
    if domain.merge_domaindata is Domain.merge_domaindata:
        known = DOMAIN_MERGES.get(domain.__module__ + "." + domain.__qualname__)
        if known is not None and set(domain.initial_data) == known[0]:
            domain.merge_domaindata = known[1]
            if domain.clear_doc is Domain.clear_doc:
                domain.clear_doc = known[2]
    return real_add_domain(registry, domain, *args, **kwargs)


# Any other domain without a merge would stop the build at the first merge: such a build reads serially.
def is_parallel_allowed(app, typ):
    if typ == "read":
        for name, domain in app.registry.domains.items():
            if domain.merge_domaindata is Domain.merge_domaindata:
                logger.warning("the %s domain cannot merge data read in parallel: doing serial read", name)
                return False
    return real_parallel_allowed(app, typ)


SphinxComponentRegistry.add_domain = add_domain
Sphinx.is_parallel_allowed = is_parallel_allowed


# breathe 4 finds the node of each doxygenfunction, doxygenenum, doxygentypedef, doxygenstruct ...
# by testing a filter on every node of the doxygen output: each compound of index.xml, its members,
# and every node of the XML file of each compound whose members did not match. That is the whole
# output once per directive, and it was nine tenths of the read of a chip (py-spy on a running build).
# A function, variable, define, typedef or enum filter only matches a member of index.xml of that
# name (node_type "member", which no node in the XML file of a compound has), and a struct or union
# filter only a compound of index.xml of that name (node_type "compound"). So only the compounds
# holding such a member, or of that name, can add a match: the search visits those, in index order,
# with the finder and filter of breathe, and finds what the whole walk finds.
try:
    from breathe.finder import index as breathe_index
    from breathe.renderer.filter import FilterFactory
except ImportError:
    breathe_index = None
patched = ("create_member_finder_filter", "create_function_and_all_friend_finder_filter",
           "create_compound_finder_filter")
if breathe_index is not None and all(hasattr(FilterFactory, name) for name in patched):
    real_member_filter = FilterFactory.create_member_finder_filter
    real_function_filter = FilterFactory.create_function_and_all_friend_finder_filter
    real_compound_filter = FilterFactory.create_compound_finder_filter
    real_index_search = breathe_index.DoxygenTypeSubItemFinder.filter_
    compounds_by_name = {}  # id(index.xml root) -> (root, {("member" or "compound", name): [i]})

    def named(filter_, node_type, name):
        filter_.index_node = (node_type, name)
        return filter_

    def member_filter(factory, namespace, name, kind):
        return named(real_member_filter(factory, namespace, name, kind), "member", name)

    def function_filter(factory, namespace, name):
        return named(real_function_filter(factory, namespace, name), "member", name)

    def compound_filter(factory, name, kind):
        return named(real_compound_filter(factory, name, kind), "compound", name)

    def index_positions(root):
        held = compounds_by_name.get(id(root))
        if held is None or held[0] is not root:
            positions = {}
            for index, compound in enumerate(root.get_compound()):
                positions.setdefault(("compound", compound.name), []).append(index)
                for member in compound.get_member():
                    at = positions.setdefault(("member", member.name), [])
                    if not at or at[-1] != index:
                        at.append(index)
            held = compounds_by_name[id(root)] = (root, positions)
        return held[1]

    def index_search(finder, ancestors, filter_, matches):
        wanted = getattr(filter_, "index_node", None)
        if wanted is None:
            return real_index_search(finder, ancestors, filter_, matches)
        root = finder.data_object
        compounds = root.get_compound()
        node_stack = [root, *ancestors]
        for index in index_positions(root).get(wanted, ()):
            compound_finder = finder.item_finder_factory.create_finder(compounds[index])
            compound_finder.filter_(node_stack, filter_, matches)

    FilterFactory.create_member_finder_filter = member_filter
    FilterFactory.create_function_and_all_friend_finder_filter = function_filter
    FilterFactory.create_compound_finder_filter = compound_filter
    breathe_index.DoxygenTypeSubItemFinder.filter_ = index_search


# Writing, each cross-reference to a C declaration (esp-docs documents C with the C++ domain) looks
# its target up among the children of the root symbol, comparing the newest id of each child, which
# Sphinx 7.1 computes anew on every call: 59% of the write in a py-spy profile of a v6.0.2 esp32
# build. An id depends on the declaration, the symbol it is attached to (its nested name) and, for
# an enumerator, the scoped symbol of its enum, so each id is kept with those and computed again
# when either changes. The cache is beside the declarations, not on them: the C++ domain compares
# declarations by their attributes.
try:
    from sphinx.domains import cpp as sphinx_cpp
except ImportError:
    sphinx_cpp = None
if sphinx_cpp is not None and hasattr(getattr(sphinx_cpp, "ASTDeclaration", None), "get_newest_id"):
    real_newest_id = sphinx_cpp.ASTDeclaration.get_newest_id
    newest_ids = {}  # id(declaration) -> (declaration, symbol, enumerator scope, newest id)

    def cached_newest_id(declaration):
        symbol = declaration.symbol
        scope = getattr(declaration, "enumeratorScopedSymbol", None)
        held = newest_ids.get(id(declaration))
        if held is not None and held[0] is declaration and held[1] is symbol and held[2] is scope:
            return held[3]
        newest = real_newest_id(declaration)
        newest_ids[id(declaration)] = (declaration, symbol, scope, newest)
        return newest

    sphinx_cpp.ASTDeclaration.get_newest_id = cached_newest_id
from sphinx.cmd.build import main
sys.exit(main(sys.argv[1:]))
"""


class SphinxJobsPopen(real_popen):
    def __init__(self, args, *rest, **kwargs):
        if isinstance(args, list) and "sphinx.cmd.build" in args and "-j" in args:
            args = list(args)
            args[args.index("-j") + 1] = jobs
            module = args.index("sphinx.cmd.build")
            if args[module - 1] == "-m":
                args[module - 1 : module + 1] = ["-c", SPHINX_MAIN]
        super().__init__(args, *rest, **kwargs)


build_docs.subprocess.Popen = SphinxJobsPopen
sys.argv[0] = "build-docs"
sys.exit(build_docs.main())
'

# Passes a chip build'"'"'s output through and writes, to argv[1], the seconds
# each phase took: configure (CMake on the dummy project), defines (macro
# dump), doxygen, api-inc (doxygen XML to .inc), read, write. Each phase starts
# at the first line that announces it.
readonly PHASE_TIMER='
import sys
import time

MARKERS = [
    ("configure", "Running CMake on dummy project"),
    ("defines", "Reading macros from"),
    ("doxygen", "Calling Doxygen"),
    ("api-inc", "Generating '"'"'api_name.inc'"'"'"),
    ("read", "reading sources..."),
    ("write", "writing output..."),
]
# Sphinx'"'"'s message catalog step prints "writing output..." before the pages are read
AFTER = {"write": "read"}
started = {"setup": time.time()}
for line in sys.stdin:
    sys.stdout.write(line)
    for phase, marker in MARKERS:
        if phase not in started and marker in line and AFTER.get(phase, "setup") in started:
            started[phase] = time.time()
started["end"] = time.time()
order = sorted(started.items(), key=lambda item: item[1])
with open(sys.argv[1], "w") as out:
    for (phase, begin), (_, end) in zip(order, order[1:]):
        out.write(f"{phase} {end - begin:.0f}\n")
'

# The latest Sphinx progress line of a chip's log, e.g. "writing output... [ 42%]". The whole log is
# searched: after the read, Sphinx prints hundreds of warnings before its first write line, and a
# status taken from the log's tail then named a phase long past.
build_phase() {
    local phase
    phase="$(grep -a -o -E '(reading sources|writing output)\.\.\. \[ *[0-9]+%\]' \
        "$WORK_DIR/logs/$1.log" 2>/dev/null | tail -n 1 || true)"
    echo "${phase:-configuring and running doxygen}"
}

# Sets IDF_DESCRIBE and IDF_COMMIT, what SOURCE.md says was built. Git is
# asked only when IDF_PATH is the top of its own repository (an unpacked tree
# inside some other repository must not report that one's commit).
read_idf_source() {
    local top
    top="$(git -C "$IDF_PATH" rev-parse --show-toplevel 2>/dev/null || true)"
    if [ -n "$top" ] && [ "$(cd "$top" && pwd)" = "$IDF_PATH" ] &&
        git -C "$IDF_PATH" rev-parse --verify -q HEAD >/dev/null 2>&1; then
        IDF_COMMIT="$(git -C "$IDF_PATH" rev-parse HEAD)"
        IDF_DESCRIBE="$(git -C "$IDF_PATH" describe 2>/dev/null ||
            git -C "$IDF_PATH" describe --tags --always)"
    else
        local header="$IDF_PATH/components/esp_common/include/esp_idf_version.h" patch
        patch="$(sed -n 's/^#define ESP_IDF_VERSION_PATCH *\([0-9][0-9]*\).*/\1/p' "$header")"
        IDF_DESCRIBE="v$(idf_version).${patch:-0} (from esp_idf_version.h; not a git checkout)"
        IDF_COMMIT="unknown (not a git checkout)"
    fi
}

# Writes DIR/SOURCE.md for a chip's build, in the layout of the corpus
# builds (`- Version:` and `- Commit:` lines, which the ingest reads).
write_source_md() {
    local target="$1" dir="$2" esp_docs spec supplied=""
    esp_docs="$("$VENV/bin/python" -c \
        'from importlib.metadata import version; print(version("esp-docs"))' 2>/dev/null || echo unknown)"
    for spec in $SUBMODULE_SOURCES; do
        supplied="$supplied, ${spec%%=*} at $(submodule_commit "${spec%%=*}")"
    done
    {
        echo "# ESP-IDF documentation build (data)"
        echo
        echo "The ESP-IDF documentation for $target, built to docutils XML with esp-docs"
        echo "(\`build-docs -t $target -l en --builders xml build\`), English."
        echo
        echo "- Upstream: github.com/espressif/esp-idf"
        echo "- Version: $IDF_DESCRIBE"
        echo "- Commit: $IDF_COMMIT"
        echo "- esp-docs: $esp_docs"
        if [ -n "$supplied" ]; then
            echo "- Submodules checked out: ${supplied#, }"
        fi
        if [ -s "${STUB_LOG:-/nonexistent}" ]; then
            echo "- Submodule placeholders: $(wc -l < "$STUB_LOG" | tr -d ' ') empty paths (--stub-missing-submodules)"
        fi
        echo "- Built by: build_idf_docs.sh on $(date -u +%Y-%m-%d)"
        echo "- Licence: Apache-2.0"
    } > "$dir/SOURCE.md"
}

# Copies a chip's XML tree to OUTPUT_DIR/<target>. An existing copy is replaced
# only when it carries a SOURCE.md (made by this script); anything else there
# is left alone and the chip counts as failed.
copy_output() {
    local target="$1" src="$2" dest="$OUTPUT_DIR/$1"
    if [ -e "$dest" ] && [ ! -f "$dest/SOURCE.md" ] && [ -n "$(ls -A "$dest" 2>/dev/null)" ]; then
        echo "$target: not copied: $dest exists without a SOURCE.md (not an earlier output of this script)"
        return 1
    fi
    mkdir -p "$OUTPUT_DIR"
    rm -rf "$dest.partial"
    cp -R "$src" "$dest.partial" || {
        echo "$target: copying $src to $dest failed"
        return 1
    }
    rm -rf "$dest"
    mv "$dest.partial" "$dest"
    echo "$target: copied to $dest"
}

# Runs the chip builds, at most JOBS at once, and prints a status line per
# chip; polls (no `wait -n`) to stay bash-3.2 compatible.
run_builds() {
    local pending="$TARGETS" running="" target pid start_time status pages failures=0
    local started_at last_progress
    started_at=$(date +%s)
    last_progress=$started_at
    mkdir -p "$WORK_DIR/logs"
    while [ -n "${pending// /}" ] || [ -n "${running// /}" ]; do
        local count=0 item
        for item in $running; do count=$((count + 1)); done
        while [ "$count" -lt "$JOBS" ] && [ -n "${pending// /}" ]; do
            # shellcheck disable=SC2086 # a space-separated target list
            set -- $pending
            target="$1"
            shift
            pending="$*"
            (build_target "$target") > "$WORK_DIR/logs/$target.log" 2>&1 &
            running="$running $target:$!:$(date +%s)"
            note "$target: build started (log: $WORK_DIR/logs/$target.log)"
            count=$((count + 1))
        done
        sleep "${POLL_SECONDS:-20}"
        local still=""
        for item in $running; do
            target="${item%%:*}"
            pid="${item#*:}"
            start_time="${pid#*:}"
            pid="${pid%%:*}"
            if kill -0 "$pid" 2>/dev/null; then
                still="$still $item"
                continue
            fi
            status=0
            wait "$pid" || status=$?
            pages="$(count_pages "$IDF_PATH/docs/_build/en/$target/xml")"
            local minutes=$((($(date +%s) - start_time) / 60))
            if [ "$pages" -ge "$MIN_PAGES" ]; then
                echo "$target: $pages pages written in ${minutes} min (build-docs exit $status) -> $IDF_PATH/docs/_build/en/$target/xml"
                write_source_md "$target" "$IDF_PATH/docs/_build/en/$target/xml"
                [ -s "$WORK_DIR/logs/$target.phases" ] &&
                    echo "$target: seconds by phase: $(tr '\n' ' ' < "$WORK_DIR/logs/$target.phases")"
                if [ -n "$OUTPUT_DIR" ] && ! copy_output "$target" "$IDF_PATH/docs/_build/en/$target/xml"; then
                    failures=$((failures + 1))
                fi
            else
                echo "$target: FAILED, $pages pages written (minimum $MIN_PAGES, build-docs exit $status); see $WORK_DIR/logs/$target.log"
                failures=$((failures + 1))
            fi
        done
        running="$still"
        if [ -n "${running// /}" ] && [ $(($(date +%s) - last_progress)) -ge "${PROGRESS_SECONDS:-300}" ]; then
            last_progress=$(date +%s)
            for item in $running; do
                target="${item%%:*}"
                start_time="${item##*:}"
                note "$target: still building after $((($(date +%s) - start_time) / 60)) min: $(build_phase "$target")"
            done
        fi
    done
    local total=0
    for target in $TARGETS; do total=$((total + 1)); done
    echo "built $((total - failures))/$total targets in $((($(date +%s) - started_at) / 60)) min; logs in $WORK_DIR/logs"
    [ "$failures" = 0 ]
}

# ------------------------------------------------------------------- main --

JOBS=""
WORK_DIR="$SCRIPT_DIR/build/idf-docs"
MIN_PAGES=250
STUB_SUBMODULES=0
SUBMODULE_SOURCES=""
ESP_DOCS_VERSION=""
DOCS_PACKAGES_OPTION=""
PYTHON_BIN="${PYTHON:-python3}"
SPHINX_JOBS=""
OUTPUT_DIR=""
PRINT_MBEDTLS_TARGETS=0
TARGETS=""
while [ $# -gt 0 ]; do
    case "$1" in
        -h | --help)
            usage
            exit 0
            ;;
        -j)
            [ $# -ge 2 ] || die_usage "-j needs a number"
            JOBS="$2"
            shift 2
            ;;
        -j*)
            JOBS="${1#-j}"
            shift
            ;;
        --work-dir)
            [ $# -ge 2 ] || die_usage "--work-dir needs a folder"
            WORK_DIR="$2"
            shift 2
            ;;
        --min-pages)
            [ $# -ge 2 ] || die_usage "--min-pages needs a number"
            MIN_PAGES="$2"
            shift 2
            ;;
        --stub-missing-submodules)
            STUB_SUBMODULES=1
            shift
            ;;
        --submodule)
            [ $# -ge 2 ] || die_usage "--submodule needs PATH=GITDIR"
            case "$2" in
                ?*=?*) ;;
                *) die_usage "--submodule wants PATH=GITDIR (e.g. components/mqtt/esp-mqtt=/src/esp-mqtt), got '$2'" ;;
            esac
            case "$2" in
                *" "* | *"	"*) die_usage "--submodule: paths with spaces are not supported, got '$2'" ;;
            esac
            SUBMODULE_SOURCES="$SUBMODULE_SOURCES $2"
            shift 2
            ;;
        --esp-docs-version)
            [ $# -ge 2 ] || die_usage "--esp-docs-version needs a version"
            ESP_DOCS_VERSION="$2"
            shift 2
            ;;
        --docs-packages)
            [ $# -ge 2 ] || die_usage "--docs-packages needs a package list, e.g. 'esp-docs~=1.1.0'"
            DOCS_PACKAGES_OPTION="$2"
            shift 2
            ;;
        --python)
            [ $# -ge 2 ] || die_usage "--python needs an interpreter, e.g. python3.11"
            PYTHON_BIN="$2"
            shift 2
            ;;
        --sphinx-jobs)
            [ $# -ge 2 ] || die_usage "--sphinx-jobs needs a number"
            SPHINX_JOBS="$2"
            shift 2
            ;;
        --output-dir)
            [ $# -ge 2 ] || die_usage "--output-dir needs a folder"
            OUTPUT_DIR="$2"
            shift 2
            ;;
        --print-mbedtls-stub-targets)
            PRINT_MBEDTLS_TARGETS=1
            shift
            ;;
        --write-standin)
            [ $# -ge 2 ] || die_usage "--write-standin needs a folder"
            write_standin "$2"
            echo "wrote the cross-compiler stand-in to $2"
            exit 0
            ;;
        -*) die_usage "unknown option '$1'" ;;
        *)
            TARGETS="$TARGETS $1"
            shift
            ;;
    esac
done

case "$JOBS" in
    "") ;;
    *[!0-9]* | 0) die_usage "-j wants a positive integer, got '$JOBS'" ;;
esac
case "$MIN_PAGES" in
    "" | *[!0-9]*) die_usage "--min-pages wants a non-negative integer, got '$MIN_PAGES'" ;;
esac
case "$SPHINX_JOBS" in
    "") ;;
    *[!0-9]* | 0) die_usage "--sphinx-jobs wants a positive integer, got '$SPHINX_JOBS'" ;;
esac
[ -z "$DOCS_PACKAGES_OPTION" ] || [ -z "$ESP_DOCS_VERSION" ] ||
    die_usage "--docs-packages and --esp-docs-version both name the esp-docs to install; give one"
case "$DOCS_PACKAGES_OPTION" in
    "") ;;
    *[!A-Za-z0-9.~=\<\>!,_\ -]*) die_usage "--docs-packages wants pip requirement specifiers such as 'esp-docs~=1.1.0 linuxdoc', got '$DOCS_PACKAGES_OPTION'" ;;
esac
case "$ESP_DOCS_VERSION" in
    "") DOCS_PACKAGES="${DOCS_PACKAGES_OPTION:-esp-docs $DOCS_EXTRA_PACKAGES}" ;;
    [0-9]*[!0-9A-Za-z.+]* | [!0-9]*) die_usage "--esp-docs-version wants a version such as 1.10.2, got '$ESP_DOCS_VERSION'" ;;
    *) DOCS_PACKAGES="esp-docs==$ESP_DOCS_VERSION $DOCS_EXTRA_PACKAGES" ;;
esac
if [ "$PRINT_MBEDTLS_TARGETS" = 0 ]; then
    [ -n "${TARGETS// /}" ] || die_usage "no TARGET given (e.g. esp32c3)"
fi

[ -n "${IDF_PATH:-}" ] || die_usage "IDF_PATH is not set: point it at an ESP-IDF checkout, e.g.
  IDF_PATH=\$HOME/esp/esp-idf $0 esp32c3"
[ -d "$IDF_PATH" ] || die_usage "IDF_PATH=$IDF_PATH is not a folder"
IDF_PATH="$(cd "$IDF_PATH" && pwd)"
for required in tools/idf.py docs/conf_common.py; do
    [ -f "$IDF_PATH/$required" ] || die_usage "IDF_PATH=$IDF_PATH is not an ESP-IDF checkout (no $required)"
done
[ -f "$IDF_PATH/tools/requirements/requirements.core.txt" ] || [ -f "$IDF_PATH/requirements.txt" ] ||
    die_usage "IDF_PATH=$IDF_PATH is not an ESP-IDF checkout (no tools/requirements/requirements.core.txt or requirements.txt)"

if [ "$PRINT_MBEDTLS_TARGETS" = 1 ]; then
    mbedtls_stub_targets
    exit 0
fi

VALID_TARGETS="$(idf_doc_targets)"
[ -n "${VALID_TARGETS// /}" ] || die "cannot read idf_targets from $IDF_PATH/docs/conf_common.py"
for target in $TARGETS; do
    # shellcheck disable=SC2086 # VALID_TARGETS is a space-separated target list
    case " $VALID_TARGETS " in
        *" $target "*) ;;
        *) die_usage "unknown target '$target'; valid targets:$(printf ' %s' $VALID_TARGETS)" ;;
    esac
done
# de-duplicate, keeping order
UNIQUE=""
for target in $TARGETS; do
    case " $UNIQUE " in *" $target "*) ;; *) UNIQUE="$UNIQUE $target" ;; esac
done
TARGETS="$UNIQUE"

check_submodule_sources
supply_submodules
require_submodules_or_opt_in
check_build_tools
mkdir -p "$WORK_DIR/logs"
WORK_DIR="$(cd "$WORK_DIR" && pwd)"
take_work_dir_lock
STANDIN_DIR="$WORK_DIR/standin"
USER_IDF_TOOLS_PATH="${IDF_TOOLS_PATH:-}"
if [ -z "$JOBS" ]; then
    JOBS="$(default_jobs)"
    # more build slots than chips would leave cores idle that the Sphinx read could use
    target_count=$(echo $TARGETS | wc -w)
    [ "$JOBS" -le "$target_count" ] || JOBS="$target_count"
fi
# the cores left to each chip build go to its Sphinx read
[ -n "$SPHINX_JOBS" ] || SPHINX_JOBS=$(($(cpu_count) / JOBS > 1 ? $(cpu_count) / JOBS : 1))

if [ -n "$OUTPUT_DIR" ]; then
    mkdir -p "$OUTPUT_DIR"
    OUTPUT_DIR="$(cd "$OUTPUT_DIR" && pwd)"
fi
read_idf_source

drop_caller_virtualenv
choose_venv
ensure_venv
setup_environment
stub_missing_submodules
note "building:$TARGETS ($JOBS at a time, Sphinx -j $SPHINX_JOBS each, ESP-IDF $IDF_DESCRIBE at $IDF_PATH)"
run_builds
