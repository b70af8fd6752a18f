"""Tests for build_idf_docs.sh that need no ESP-IDF tree and download nothing.

The full docs build is verified by hand on a real checkout (see
docs/idf-docs-build.md); here we pin the usage errors and the behaviour of the
cross-compiler stand-in, which is what makes that build possible on Linux.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "build_idf_docs.sh"
FAKE_TARGETS = ["esp32", "esp32c3", "esp32p4"]

needs_host_gcc = pytest.mark.skipif(
    shutil.which("gcc") is None or shutil.which("g++") is None,
    reason="host gcc/g++ not installed (Debian: apt-get install gcc g++)",
)


def run_script(
    *args: str, env_updates: dict[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the script with IDF_PATH removed unless a test sets it."""
    env = {k: v for k, v in os.environ.items() if k not in ("IDF_PATH", "PYTHON")}
    for key, value in (env_updates or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.fixture
def fake_idf(tmp_path: Path) -> Path:
    """The few files the script reads before it installs anything."""
    root = tmp_path / "esp-idf"
    (root / "tools" / "requirements").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "tools" / "idf.py").write_text("# placeholder\n")
    (root / "tools" / "requirements" / "requirements.core.txt").write_text("esptool\n")
    quoted = ", ".join(f"'{t}'" for t in FAKE_TARGETS)
    (root / "docs" / "conf_common.py").write_text(f"languages = ['en', 'zh_CN']\nidf_targets = [{quoted}]\n")
    (root / "tools" / "cmake").mkdir()
    for chip, prefix in [
        ("esp32", "xtensa-esp32-elf-"),
        ("esp32c3", "riscv32-esp-elf-"),
        ("esp32p4", "riscv32-esp-elf-"),
    ]:
        (root / "tools" / "cmake" / f"toolchain-{chip}.cmake").write_text(
            f"set(_CMAKE_TOOLCHAIN_PREFIX {prefix})\ninclude($ENV{{IDF_PATH}}/tools/cmake/toolchain.cmake)\n"
        )
    version_dir = root / "components" / "esp_common" / "include"
    version_dir.mkdir(parents=True)
    (version_dir / "esp_idf_version.h").write_text(
        "#define ESP_IDF_VERSION_MAJOR   6\n"
        "#define ESP_IDF_VERSION_MINOR   2\n"
        "#define ESP_IDF_VERSION_PATCH   0\n"
    )
    return root


@pytest.fixture
def standin(tmp_path: Path) -> Path:
    out = tmp_path / "standin"
    result = run_script("--write-standin", str(out))
    assert result.returncode == 0, result.stderr
    return out


# ------------------------------------------------------------ usage errors --


def test_help_exits_zero_and_documents_options() -> None:
    result = run_script("--help")
    assert result.returncode == 0
    for option in ("-j N", "--work-dir", "--min-pages", "--stub-missing-submodules"):
        assert option in result.stdout


def test_no_target_is_a_usage_error(fake_idf: Path) -> None:
    result = run_script(env_updates={"IDF_PATH": str(fake_idf)})
    assert result.returncode == 2
    assert "no TARGET given" in result.stderr


def test_unknown_option_is_a_usage_error() -> None:
    result = run_script("--frobnicate", "esp32c3")
    assert result.returncode == 2
    assert "unknown option '--frobnicate'" in result.stderr


@pytest.mark.parametrize("jobs", ["0", "two", "-3"])
def test_bad_job_count_is_rejected(jobs: str) -> None:
    result = run_script("-j", jobs, "esp32c3")
    assert result.returncode == 2
    assert "-j" in result.stderr


def test_missing_idf_path_says_what_to_set() -> None:
    result = run_script("esp32c3")
    assert result.returncode == 2
    assert "IDF_PATH is not set" in result.stderr


def test_idf_path_that_is_not_a_checkout(tmp_path: Path) -> None:
    result = run_script("esp32c3", env_updates={"IDF_PATH": str(tmp_path)})
    assert result.returncode == 2
    assert "is not an ESP-IDF checkout" in result.stderr


def test_unknown_target_lists_the_trees_valid_targets(fake_idf: Path) -> None:
    result = run_script("esp32c3", "esp99", env_updates={"IDF_PATH": str(fake_idf)})
    assert result.returncode == 2
    assert "unknown target 'esp99'" in result.stderr
    assert "valid targets: esp32 esp32c3 esp32p4" in result.stderr


def test_missing_submodules_without_opt_in_names_the_git_command(fake_idf: Path) -> None:
    (fake_idf / ".gitmodules").write_text(
        '[submodule "lwip"]\n\tpath = components/lwip/lwip\n\turl = ../../espressif/esp-lwip.git\n'
    )
    (fake_idf / "components" / "lwip" / "lwip").mkdir(parents=True)
    result = run_script("esp32c3", env_updates={"IDF_PATH": str(fake_idf)})
    assert result.returncode == 1
    assert "components/lwip/lwip" in result.stderr
    assert "submodule update --init --recursive" in result.stderr
    assert "--stub-missing-submodules" in result.stderr
    assert list((fake_idf / "components" / "lwip" / "lwip").iterdir()) == []


def test_missing_build_tools_are_named_with_their_packages(fake_idf: Path, tmp_path: Path) -> None:
    """A PATH with every host command except doxygen, cmake and ninja."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            if name in {"doxygen", "cmake", "ninja"} or (bin_dir / name).exists():
                continue
            (bin_dir / name).symlink_to(os.path.join(folder, name))
    result = run_script("esp32c3", env_updates={"IDF_PATH": str(fake_idf), "PATH": str(bin_dir)})
    assert result.returncode == 1
    assert "missing tools: doxygen cmake ninja" in result.stderr
    assert "apt-get install doxygen cmake ninja-build" in result.stderr
    assert "brew install doxygen cmake ninja" in result.stderr


# --------------------------------------------------------------- stand-in --


@pytest.mark.parametrize(
    "tool, triple",
    [
        ("riscv32-esp-elf-gcc", "riscv32-esp-elf"),
        ("xtensa-esp32-elf-gcc", "xtensa-esp32-elf"),
        ("xtensa-esp32s3-elf-g++", "xtensa-esp32s3-elf"),
        ("xtensa-esp-elf-gcc", "xtensa-esp-elf"),
    ],
)
def test_standin_answers_dumpmachine_with_its_own_triple(standin: Path, tool: str, triple: str) -> None:
    result = subprocess.run([str(standin / tool), "-dumpmachine"], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == triple


@needs_host_gcc
def test_standin_drops_target_only_flags(standin: Path, tmp_path: Path) -> None:
    source = tmp_path / "tiny.c"
    source.write_text("int answer(void) { return 42; }\n")
    target_flags = ["-march=rv32imc_zicsr_zifencei", "-mabi=ilp32", "-specs=nosys.specs"]
    host = subprocess.run(
        ["gcc", *target_flags, "-c", str(source), "-o", str(tmp_path / "host.o")],
        capture_output=True,
        check=False,
    )
    assert host.returncode != 0, "host gcc accepted RISC-V flags; the test proves nothing"
    result = subprocess.run(
        [
            str(standin / "riscv32-esp-elf-gcc"),
            *target_flags,
            "-c",
            str(source),
            "-o",
            str(tmp_path / "tiny.o"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "tiny.o").stat().st_size > 0


@needs_host_gcc
def test_standin_expands_nested_response_files(standin: Path, tmp_path: Path) -> None:
    header = tmp_path / "probe.h"
    header.write_text("#define FROM_HEADER 1\n")
    inner = tmp_path / "inner.rsp"
    inner.write_text('-DINNER=7 "-DQUOTED=\\"a b\\""\n')
    outer = tmp_path / "outer.rsp"
    outer.write_text(f"-DOUTER=3 -mlongcalls @{inner}\n")
    result = subprocess.run(
        [str(standin / "xtensa-esp32-elf-gcc"), f"@{outer}", "-dM", "-E", str(header)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    defines = set(result.stdout.splitlines())
    assert "#define OUTER 3" in defines
    assert "#define INNER 7" in defines
    assert '#define QUOTED "a b"' in defines
    assert "#define FROM_HEADER 1" in defines


@needs_host_gcc
def test_standin_macro_dump_has_no_host_os_macros(standin: Path, tmp_path: Path) -> None:
    header = tmp_path / "caps.h"
    header.write_text("#define SOC_UART_SUPPORTED 1\n#define SOC_CPU_CORES_NUM (1U)\n")
    host = subprocess.run(["gcc", "-dM", "-E", str(header)], capture_output=True, text=True, check=True)
    assert "#define linux 1" in host.stdout, "host gcc has no linux macro here"
    result = subprocess.run(
        [str(standin / "riscv32-esp-elf-gcc"), "-dM", "-E", str(header)],
        capture_output=True,
        text=True,
        check=True,
    )
    names = {line.split()[1] for line in result.stdout.splitlines() if line.startswith("#define")}
    assert {"SOC_UART_SUPPORTED", "SOC_CPU_CORES_NUM"} <= names
    assert not names & {"linux", "unix", "__linux__", "__unix__", "__x86_64__"}


@needs_host_gcc
def test_standin_refuses_to_link_firmware(standin: Path, tmp_path: Path) -> None:
    source = tmp_path / "main.c"
    source.write_text("int main(void) { return 0; }\n")
    result = subprocess.run(
        [str(standin / "riscv32-esp-elf-gcc"), str(source), "-o", str(tmp_path / "app.elf")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "refusing to produce firmware" in result.stderr
    assert not (tmp_path / "app.elf").exists()


def test_standin_forwards_binutils_to_the_host(standin: Path) -> None:
    if shutil.which("objcopy") is None:
        pytest.skip("host objcopy not installed (Debian: apt-get install binutils)")
    result = subprocess.run(
        [str(standin / "riscv32-esp-elf-objcopy"), "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0
    assert "objcopy" in result.stdout.lower()


def test_submodules_missing_from_the_git_index_still_count_as_missing(fake_idf: Path) -> None:
    """A clone whose index lists no gitlinks: git reports nothing, the folder is empty."""
    (fake_idf / ".gitmodules").write_text(
        '[submodule "tlsf"]\n\tpath = components/heap/tlsf\n\turl = ../../espressif/tlsf.git\n'
    )
    (fake_idf / "components" / "heap" / "tlsf").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(fake_idf)], check=True)
    result = run_script("esp32c3", env_updates={"IDF_PATH": str(fake_idf)})
    assert result.returncode == 1
    assert "components/heap/tlsf" in result.stderr


@pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in ("doxygen", "cmake", "ninja")),
    reason="the tool check comes before the lock (Debian: apt-get install doxygen cmake ninja-build)",
)
def test_a_second_run_on_the_same_work_dir_is_refused(fake_idf: Path, tmp_path: Path) -> None:
    work_dir = tmp_path / "work"
    (work_dir / ".lock").mkdir(parents=True)
    (work_dir / ".lock" / "pid").write_text(f"{os.getpid()}\n")
    result = run_script("--work-dir", str(work_dir), "esp32c3", env_updates={"IDF_PATH": str(fake_idf)})
    assert result.returncode == 1
    assert f"another build_idf_docs.sh (pid {os.getpid()}) is using" in result.stderr
    assert (work_dir / ".lock" / "pid").read_text().strip() == str(os.getpid())


# ------------------------------------------ orchestration with a fake esp-docs --

needs_build_tools = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in ("doxygen", "cmake", "ninja", "gcc", "g++")),
    reason="the script checks for these first (Debian: apt-get install doxygen cmake ninja-build g++)",
)

FAKE_BUILD_DOCS = """#!/usr/bin/env bash
# Stands in for esp-docs: records what it was given, writes N pages plus doxygen XML.
chip="$2"
env > "$FAKE_DUMP_DIR/env-$chip.txt"
command -v riscv32-esp-elf-gcc > "$FAKE_DUMP_DIR/compiler-$chip.txt"
pwd > "$FAKE_DUMP_DIR/cwd-$chip.txt"
mkdir -p "_build/en/$chip/xml/api-reference"
for i in $(seq 1 "$FAKE_PAGES"); do
    printf '<?xml version="1.0"?>\\n<!DOCTYPE document>\\n<document source="p$i.rst">\\n</document>\\n' \\
        > "_build/en/$chip/xml/api-reference/page$i.xml"
done
for i in 1 2 3; do
    printf '<?xml version="1.0"?>\\n<doxygenindex version="1.9.4">\\n</doxygenindex>\\n' \\
        > "_build/en/$chip/xml/index$i.xml"
done
exit 1  # like the real one when a warning is new to the known-warnings list
"""


FAKE_VENV_PYTHON = """#!/usr/bin/env bash
# Stands in for the docs venv's python: for the script's build-docs launcher it records the Sphinx
# -j asked for and runs the fake build-docs; anything else (the phase timer included) is real Python.
if [ "${1:-}" = -u ] && [ "${2:-}" = -c ]; then
    case "$3" in
        *build_docs*)
            echo "$4" > "$FAKE_DUMP_DIR/sphinx-jobs-$6.txt"
            shift 4
            exec "$(dirname "$0")/build-docs" "$@"
            ;;
    esac
fi
exec python3 "$@"
"""


def fake_venv_dir(
    work_dir: Path, idf: Path, packages: str = "esp-docs linuxdoc sphinxcontrib-mermaid"
) -> Path:
    """Where the script looks for the venv of this tooling set (interpreter, packages, tree requirements)."""
    requirements = idf / "tools" / "requirements" / "requirements.core.txt"
    stamp = subprocess.run(
        [
            "bash",
            "-c",
            '{ echo python3; echo "$2"; grep -v -E "^[[:space:]]*file:" "$1"; } | cksum | cut -d" " -f1',
            "-",
            str(requirements),
            packages,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return work_dir / "venvs" / stamp


def make_fake_docs_venv(work_dir: Path, idf: Path) -> Path:
    """A venv the script accepts as complete: build-docs and python present, marked complete."""
    venv = fake_venv_dir(work_dir, idf)
    bin_dir = venv / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "build-docs").write_text(FAKE_BUILD_DOCS)
    (bin_dir / "build-docs").chmod(0o755)
    (bin_dir / "python").write_text(FAKE_VENV_PYTHON)
    (bin_dir / "python").chmod(0o755)
    (venv / ".complete").touch()
    return venv


def run_fake_build(
    fake_idf: Path, tmp_path: Path, pages: int, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    work_dir = tmp_path / "work"
    dumps = tmp_path / "dumps"
    dumps.mkdir(exist_ok=True)
    if not (work_dir / "venvs").exists():
        make_fake_docs_venv(work_dir, fake_idf)
    return run_script(
        "--work-dir",
        str(work_dir),
        *args,
        env_updates={
            "IDF_PATH": str(fake_idf),
            "FAKE_PAGES": str(pages),
            "FAKE_DUMP_DIR": str(dumps),
            "POLL_SECONDS": "1",
            "IDF_TOOLS_PATH": str(tmp_path / "no-espressif-tools"),
            "VIRTUAL_ENV": str(tmp_path / "project-venv"),
            "PATH": f"{tmp_path / 'project-venv' / 'bin'}:{os.environ['PATH']}",
            **env,
        },
    )


@needs_build_tools
def test_pages_are_counted_and_decide_success_despite_build_docs_exit(fake_idf: Path, tmp_path: Path) -> None:
    result = run_fake_build(fake_idf, tmp_path, 7, "--min-pages", "5", "-j", "2", "esp32c3", "esp32p4")
    assert result.returncode == 0, result.stderr
    xml_dir = fake_idf / "docs" / "_build" / "en" / "esp32c3" / "xml"
    assert f"esp32c3: 7 pages written in 0 min (build-docs exit 1) -> {xml_dir}" in result.stdout
    assert "esp32p4: 7 pages written" in result.stdout
    assert result.stdout.splitlines()[-1].startswith("built 2/2 targets in ")


@needs_build_tools
def test_too_few_pages_fail_and_stale_pages_do_not_count(fake_idf: Path, tmp_path: Path) -> None:
    stale = fake_idf / "docs" / "_build" / "en" / "esp32c3" / "xml"
    stale.mkdir(parents=True)
    for i in range(10):
        (stale / f"old{i}.xml").write_text("<?xml version='1.0'?>\n<document>\n</document>\n")
    result = run_fake_build(fake_idf, tmp_path, 3, "--min-pages", "5", "esp32c3")
    assert result.returncode == 1
    assert "esp32c3: FAILED, 3 pages written (minimum 5, build-docs exit 1)" in result.stdout
    assert result.stdout.splitlines()[-1].startswith("built 0/1 targets in ")


@needs_build_tools
def test_docs_build_gets_the_export_sh_environment_without_the_project_venv(
    fake_idf: Path, tmp_path: Path
) -> None:
    result = run_fake_build(fake_idf, tmp_path, 1, "--min-pages", "1", "esp32c3")
    assert result.returncode == 0, result.stderr
    env = dict(
        line.split("=", 1)
        for line in (tmp_path / "dumps" / "env-esp32c3.txt").read_text().splitlines()
        if "=" in line
    )
    work_dir = tmp_path / "work"
    assert env["IDF_PATH"] == str(fake_idf)
    assert env["IDF_TOOLS_PATH"] == str(work_dir / "idf-tools")
    venv = fake_venv_dir(work_dir, fake_idf)
    assert env["IDF_PYTHON_ENV_PATH"] == str(venv)
    assert env["IDF_PYTHON_CHECK_CONSTRAINTS"] == "no"
    assert env["IDF_MAINTAINER"] == "1"
    assert env["IDF_SKIP_CHECK_SUBMODULES"] == "1"
    assert env["ESP_IDF_VERSION"] == "6.2"
    assert "VIRTUAL_ENV" not in env
    assert str(tmp_path / "project-venv" / "bin") not in env["PATH"].split(":")
    assert env["PATH"].split(":")[0] == str(venv / "bin")
    compiler = (tmp_path / "dumps" / "compiler-esp32c3.txt").read_text().strip()
    assert compiler == str(work_dir / "standin" / "riscv32-esp-elf-gcc")
    assert (tmp_path / "dumps" / "cwd-esp32c3.txt").read_text().strip() == str(fake_idf / "docs")


@needs_build_tools
def test_one_chip_on_two_cores_reads_with_two_sphinx_jobs_and_reports_its_phases(
    fake_idf: Path, tmp_path: Path
) -> None:
    result = run_fake_build(fake_idf, tmp_path, 1, "--min-pages", "1", "-j", "1", "esp32c3")
    assert result.returncode == 0, result.stderr
    cores = os.cpu_count() or 1
    assert (tmp_path / "dumps" / "sphinx-jobs-esp32c3.txt").read_text().strip() == str(max(cores, 1))
    assert "esp32c3: seconds by phase: setup " in result.stdout
    # without -j, one chip is one build slot however many cores and memory allow: the rest read
    result = run_fake_build(fake_idf, tmp_path, 1, "--min-pages", "1", "esp32c3")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "dumps" / "sphinx-jobs-esp32c3.txt").read_text().strip() == str(max(cores, 1))
    assert f"(1 at a time, Sphinx -j {max(cores, 1)} each" in result.stderr + result.stdout
    result = run_fake_build(fake_idf, tmp_path, 1, "--min-pages", "1", "--sphinx-jobs", "3", "esp32c3")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "dumps" / "sphinx-jobs-esp32c3.txt").read_text().strip() == "3"


def test_docs_tooling_options_are_checked(fake_idf: Path) -> None:
    env = {"IDF_PATH": str(fake_idf)}
    result = run_script("--docs-packages", "esp-docs; rm -rf /", "esp32c3", env_updates=env)
    assert result.returncode == 2
    assert "--docs-packages wants pip requirement specifiers such as 'esp-docs~=1.1.0" in result.stderr
    result = run_script("--docs-packages", "esp-docs~=1.1.0", "--esp-docs-version", "2.6.0", "esp32c3")
    assert result.returncode == 2 and "give one" in result.stderr
    result = run_script("--sphinx-jobs", "0", "esp32c3", env_updates=env)
    assert result.returncode == 2 and "--sphinx-jobs wants a positive integer, got '0'" in result.stderr


@needs_build_tools
def test_an_installed_espressif_toolchain_replaces_the_standin(fake_idf: Path, tmp_path: Path) -> None:
    """The layout install.sh leaves under IDF_TOOLS_PATH (~/.espressif)."""
    tools = tmp_path / "espressif"
    real_bin = tools / "tools" / "riscv32-esp-elf" / "esp-14.2.0_20250730" / "riscv32-esp-elf" / "bin"
    real_bin.mkdir(parents=True)
    real_gcc = real_bin / "riscv32-esp-elf-gcc"
    real_gcc.write_text("#!/bin/sh\necho riscv32-esp-elf\n")
    real_gcc.chmod(0o755)
    result = run_fake_build(fake_idf, tmp_path, 1, "--min-pages", "1", "esp32c3", IDF_TOOLS_PATH=str(tools))
    assert result.returncode == 0, result.stderr
    assert f"esp32c3: using the real cross compiler {real_gcc}" in result.stderr
    assert "stand-in" not in result.stderr
    assert (tmp_path / "dumps" / "compiler-esp32c3.txt").read_text().strip() == str(real_gcc)


# ------------------------------------------------------------ release tags --
#
# Building a release (e.g. v5.5.5) differs from master: some submodules must be
# real checkouts and the mbedtls placeholder must declare that release's
# library names. The fixtures below are small stand-ins written for these
# tests, not copies of ESP-IDF files.

needs_git = pytest.mark.skipif(
    shutil.which("git") is None, reason="git not installed (Debian: apt-get install git)"
)

MQTT_PATH = "components/mqtt/esp-mqtt"
MQTT_URL = "../../espressif/esp-mqtt.git"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def make_source_repo(path: Path, versions: int = 2) -> list[str]:
    """A tiny stand-in for a submodule's own repository; returns its commits, oldest first."""
    path.mkdir(parents=True)
    git(path, "init", "-q")
    commits = []
    for number in range(1, versions + 1):
        (path / "CMakeLists.txt").write_text(f"# version {number}\n")
        git(path, "add", "CMakeLists.txt")
        git(path, "commit", "-q", "-m", f"version {number}")
        commits.append(git(path, "rev-parse", "HEAD"))
    return commits


def record_submodule(idf: Path, commit: str) -> None:
    """Make the fake tree a git checkout whose HEAD records MQTT_PATH at COMMIT."""
    (idf / ".gitmodules").write_text(f'[submodule "{MQTT_PATH}"]\n\tpath = {MQTT_PATH}\n\turl = {MQTT_URL}\n')
    git(idf, "init", "-q")
    git(idf, "add", "-A")
    git(idf, "update-index", "--add", "--cacheinfo", f"160000,{commit},{MQTT_PATH}")
    git(idf, "commit", "-q", "-m", "fake release")
    git(idf, "tag", "-a", "v9.9.9", "-m", "fake release tag")
    (idf / MQTT_PATH).mkdir(parents=True, exist_ok=True)


@needs_git
def test_submodule_option_rejects_a_clone_without_the_recorded_commit(fake_idf: Path, tmp_path: Path) -> None:
    make_source_repo(tmp_path / "esp-mqtt")
    recorded = "0123456789abcdef0123456789abcdef01234567"  # in no repository
    record_submodule(fake_idf, recorded)
    result = run_script(
        "--submodule",
        f"{MQTT_PATH}={tmp_path / 'esp-mqtt'}",
        "esp32c3",
        env_updates={"IDF_PATH": str(fake_idf)},
    )
    assert result.returncode == 1
    assert f"does not have commit {recorded}" in result.stderr
    assert f"records for {MQTT_PATH}" in result.stderr
    assert MQTT_URL in result.stderr
    assert "https://github.com/espressif/esp-mqtt.git" in result.stderr
    assert list((fake_idf / MQTT_PATH).iterdir()) == []


@needs_git
def test_submodule_option_names_the_valid_paths(fake_idf: Path, tmp_path: Path) -> None:
    make_source_repo(tmp_path / "esp-mqtt")
    record_submodule(fake_idf, "0123456789abcdef0123456789abcdef01234567")
    result = run_script(
        "--submodule",
        f"components/mqtt/mqtt={tmp_path / 'esp-mqtt'}",
        "esp32c3",
        env_updates={"IDF_PATH": str(fake_idf)},
    )
    assert result.returncode == 2
    assert "'components/mqtt/mqtt' is not a submodule path" in result.stderr
    assert f"  {MQTT_PATH}" in result.stderr


@pytest.mark.parametrize("spec", ["components/mqtt/esp-mqtt", "=/src/esp-mqtt", "components/mqtt/esp-mqtt="])
def test_submodule_option_wants_path_equals_gitdir(spec: str) -> None:
    result = run_script("--submodule", spec, "esp32c3")
    assert result.returncode == 2
    assert "--submodule wants PATH=GITDIR" in result.stderr


@needs_git
def test_submodule_option_leaves_a_folder_with_content_alone(fake_idf: Path, tmp_path: Path) -> None:
    commits = make_source_repo(tmp_path / "esp-mqtt")
    record_submodule(fake_idf, commits[0])
    (fake_idf / MQTT_PATH / "notes.txt").write_text("someone's file\n")
    result = run_script(
        "--submodule",
        f"{MQTT_PATH}={tmp_path / 'esp-mqtt'}",
        "esp32c3",
        env_updates={"IDF_PATH": str(fake_idf)},
    )
    assert result.returncode == 1
    assert "is not empty and is not a checkout of" in result.stderr
    assert sorted(p.name for p in (fake_idf / MQTT_PATH).iterdir()) == ["notes.txt"]


@needs_git
@needs_build_tools
def test_submodule_option_checks_out_the_recorded_commit_and_source_md_names_the_release(
    fake_idf: Path, tmp_path: Path
) -> None:
    commits = make_source_repo(tmp_path / "esp-mqtt")
    record_submodule(fake_idf, commits[0])  # the older one: HEAD of the clone would be wrong
    idf_commit = git(fake_idf, "rev-parse", "HEAD")
    output = tmp_path / "out"
    result = run_fake_build(
        fake_idf,
        tmp_path,
        2,
        "--min-pages",
        "1",
        "--submodule",
        f"{MQTT_PATH}={tmp_path / 'esp-mqtt'}",
        "--output-dir",
        str(output),
        "esp32c3",
    )
    assert result.returncode == 0, result.stderr
    checkout = fake_idf / MQTT_PATH
    assert git(checkout, "rev-parse", "HEAD") == commits[0]
    assert (checkout / "CMakeLists.txt").read_text() == "# version 1\n"
    assert git(fake_idf, "status", "--porcelain", "--untracked-files=no") == ""

    source_md = (fake_idf / "docs" / "_build" / "en" / "esp32c3" / "xml" / "SOURCE.md").read_text()
    lines = source_md.splitlines()
    assert "- Version: v9.9.9" in lines
    assert f"- Commit: {idf_commit}" in lines
    assert f"- Submodules checked out: {MQTT_PATH} at {commits[0]}" in lines
    copied = output / "esp32c3"
    assert (copied / "SOURCE.md").read_text() == source_md
    assert len(list((copied / "api-reference").glob("page*.xml"))) == 2
    assert f"esp32c3: copied to {copied}" in result.stdout


@needs_build_tools
def test_output_dir_is_not_overwritten_when_it_holds_something_else(fake_idf: Path, tmp_path: Path) -> None:
    output = tmp_path / "out"
    (output / "esp32c3").mkdir(parents=True)
    (output / "esp32c3" / "keep.txt").write_text("not a build\n")
    result = run_fake_build(fake_idf, tmp_path, 2, "--min-pages", "1", "--output-dir", str(output), "esp32c3")
    assert result.returncode == 1
    assert "exists without a SOURCE.md" in result.stdout
    assert sorted(p.name for p in (output / "esp32c3").iterdir()) == ["keep.txt"]
    # the build's own copy still says what was built; no git here, so the header
    source_md = fake_idf / "docs" / "_build" / "en" / "esp32c3" / "xml" / "SOURCE.md"
    lines = source_md.read_text().splitlines()
    assert "- Version: v6.2.0 (from esp_idf_version.h; not a git checkout)" in lines
    assert "- Commit: unknown (not a git checkout)" in lines


FAKE_DOCS_PYTHON = """#!/usr/bin/env bash
# Stands in for the docs venv's python: the esp-docs project path, a CMake
# configure that fails as ESP-IDF's does, and real Python for the script's
# own helpers.
case "${1:-}" in
    -c) echo "$FAKE_PROJECT"; exit 0 ;;
    */tools/idf.py) cat "$FAKE_CONFIGURE_LOG"; exit 1 ;;
esac
exec python3 "$@"
"""


@needs_git
@needs_build_tools
def test_a_configure_that_needs_a_real_submodule_names_its_path_commit_and_origin(
    fake_idf: Path, tmp_path: Path
) -> None:
    recorded = "89abcdef0123456789abcdef0123456789abcdef"
    record_submodule(fake_idf, recorded)
    (fake_idf / "components" / "mqtt" / "CMakeLists.txt").write_text("# refuses an empty esp-mqtt\n")
    # ESP-IDF reports errors of its nested CMake run indented and wrapped
    log = tmp_path / "configure.log"
    log.write_text(
        f"-- Building ESP-IDF components for target esp32c3\n"
        f"CMake Error at {fake_idf}/tools/cmake/component.cmake:231 (message):\n"
        f"  CMake Error at {fake_idf}/components/mqtt/CMakeLists.txt:3\n"
        f"  (message):\n\n"
        f"    Missing esp-mqtt submodule.\n"
        f"-- Configuring incomplete, errors occurred!\n"
    )
    work_dir = tmp_path / "work"
    python = make_fake_docs_venv(work_dir, fake_idf) / "bin" / "python"
    python.write_text(FAKE_DOCS_PYTHON)
    python.chmod(0o755)
    result = run_fake_build(
        fake_idf,
        tmp_path,
        1,
        "--stub-missing-submodules",
        "esp32c3",
        FAKE_PROJECT=str(tmp_path / "project"),
        FAKE_CONFIGURE_LOG=str(log),
    )
    assert result.returncode == 1
    assert f"{MQTT_PATH} at commit {recorded}" in result.stderr
    assert f"from {MQTT_URL} (https://github.com/espressif/esp-mqtt.git)" in result.stderr
    assert f"--submodule {MQTT_PATH}=/path/to/clone" in result.stderr
    assert "placeholders cannot fix" not in result.stderr
    assert list((fake_idf / MQTT_PATH).iterdir()) == []


# mbedtls 3 (ESP-IDF 5.x) and mbedtls 4 / tf-psa-crypto (ESP-IDF 6) name their
# libraries differently; the excerpts use the constructs each release's
# components/mbedtls/CMakeLists.txt uses to refer to them.
MBEDTLS_3_CMAKELISTS = """\
add_custom_target(custom_bundle DEPENDS ${cert_bundle})
add_subdirectory(mbedtls)
get_target_property(src_tls mbedtls SOURCES)
set_property(TARGET mbedtls PROPERTY SOURCES ${src_tls})
# Core libraries from the mbedTLS project
set(mbedtls_targets mbedtls mbedcrypto mbedx509)
list(APPEND mbedtls_targets everest p256m)
target_sources(mbedtls PRIVATE ${mbedtls_target_sources})
target_link_libraries(mbedcrypto PRIVATE idf::esp_security)
foreach(target ${mbedtls_targets})
    target_compile_definitions(${target} PUBLIC -DMBEDTLS_CONFIG_FILE="mbedtls/esp_config.h")
endforeach()
set_property(TARGET mbedcrypto APPEND PROPERTY LINK_INTERFACE_LIBRARIES mbedtls)
target_link_libraries(${COMPONENT_LIB} ${linkage_type} ${mbedtls_targets})
"""

MBEDTLS_4_CMAKELISTS = """\
add_subdirectory(mbedtls)
get_target_property(src_tls mbedtls SOURCES)
# set_property(TARGET mbedcrypto PROPERTY SOURCES ${src_crypto})
get_target_property(src_builtin builtin SOURCES)
set(mbedtls_compile_targets mbedtls mbedx509 tfpsacrypto builtin
                    everest p256-m extras platform utilities)
set(mbedtls_link_targets mbedtls mbedx509 tfpsacrypto)
add_library(mbed-builtin ALIAS builtin)
target_include_directories(tfpsacrypto PUBLIC "port/include")
foreach(target ${mbedtls_compile_targets})
    if(NOT TARGET ${target})
        continue()
    endif()
    set_config_files_compile_definitions(${target})
endforeach()
add_dependencies(tfpsacrypto builtin everest p256-m extras platform utilities)
"""


@pytest.mark.parametrize(
    "cmakelists, expected",
    [
        (MBEDTLS_3_CMAKELISTS, {"mbedtls", "mbedcrypto", "mbedx509", "everest", "p256m"}),
        (
            MBEDTLS_4_CMAKELISTS,
            {
                "mbedtls",
                "mbedx509",
                "tfpsacrypto",
                "builtin",
                "everest",
                "p256-m",
                "extras",
                "platform",
                "utilities",
            },
        ),
    ],
    ids=["mbedtls3-idf5", "mbedtls4-idf6"],
)
def test_mbedtls_placeholder_targets_come_from_the_trees_own_cmakelists(
    fake_idf: Path, cmakelists: str, expected: set[str]
) -> None:
    component = fake_idf / "components" / "mbedtls"
    component.mkdir(parents=True)
    (component / "CMakeLists.txt").write_text(cmakelists)
    result = run_script("--print-mbedtls-stub-targets", env_updates={"IDF_PATH": str(fake_idf)})
    assert result.returncode == 0, result.stderr
    assert set(result.stdout.split()) == expected


def test_mbedtls_cmakelists_without_targets_is_a_clear_error(fake_idf: Path) -> None:
    component = fake_idf / "components" / "mbedtls"
    component.mkdir(parents=True)
    (component / "CMakeLists.txt").write_text("idf_component_register(SRCS x.c)\n")
    result = run_script("--print-mbedtls-stub-targets", env_updates={"IDF_PATH": str(fake_idf)})
    assert result.returncode == 1
    assert "found no mbedtls library targets in" in result.stderr


def test_esp_docs_version_must_look_like_a_version() -> None:
    result = run_script("--esp-docs-version", "latest", "esp32c3")
    assert result.returncode == 2
    assert "--esp-docs-version wants a version" in result.stderr


@needs_git
@needs_build_tools
def test_source_md_does_not_take_the_commit_of_an_enclosing_repository(
    fake_idf: Path, tmp_path: Path
) -> None:
    """An unpacked ESP-IDF tree that happens to sit inside another git repository."""
    git(tmp_path, "init", "-q")
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "unrelated project")
    result = run_fake_build(fake_idf, tmp_path, 1, "--min-pages", "1", "esp32c3")
    assert result.returncode == 0, result.stderr
    source_md = fake_idf / "docs" / "_build" / "en" / "esp32c3" / "xml" / "SOURCE.md"
    assert "- Commit: unknown (not a git checkout)" in source_md.read_text().splitlines()


def test_one_missing_include_directory_brings_its_siblings_in_the_same_round(tmp_path: Path) -> None:
    """CMake reports one missing include folder per configure; the quoted folder paths beside it in
    the component's CMake files that point into the same empty submodule are created together."""
    script = SCRIPT.read_text()
    body = script[script.index("missing_paths_from_log() {") :]
    parser = body[body.index("<<'PY'\n") + len("<<'PY'\n") : body.index("\nPY\n")]
    idf = tmp_path / "esp-idf"
    (idf / "components" / "mbedtls" / "mbedtls").mkdir(parents=True)
    (idf / "components" / "mbedtls" / "CMakeLists.txt").write_text(
        'set(mbedtls_include_dirs\n    "port/include"\n    "mbedtls/include"\n    "mbedtls/library"\n'
        '    "mbedtls/tf-psa-crypto/drivers/builtin/src/"\n    "mbedtls/ChangeLog.txt")\n'
        'include_directories("${COMPONENT_DIR}/mbedtls/extras")\n'
    )
    missing = idf / "components" / "mbedtls" / "mbedtls" / "include"
    log = tmp_path / "configure.log"
    log.write_text(
        f"CMake Error at x.cmake:1 (message):\n  Include directory '{missing}' is not a directory\n"
    )
    (tmp_path / "parser.py").write_text(parser)
    result = subprocess.run(
        ["python3", str(tmp_path / "parser.py"), str(log), str(idf), "components/mbedtls/mbedtls"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.splitlines() == [
        "components/mbedtls/mbedtls/extras dir",
        "components/mbedtls/mbedtls/include dir",
        "components/mbedtls/mbedtls/library dir",
        "components/mbedtls/mbedtls/tf-psa-crypto/drivers/builtin/src dir",
    ]


def test_the_seed_names_every_components_include_folders_inside_empty_submodules(tmp_path: Path) -> None:
    """CMake stops at the first missing include folder of a configure, one component per round
    (v6.0.2 esp32: eleven rounds); the folders the components name, quoted or bare, come first."""
    script = SCRIPT.read_text()
    body = script[script.index("missing_paths_from_log() {") :]
    parser = body[body.index("<<'PY'\n") + len("<<'PY'\n") : body.index("\nPY\n")]
    idf = tmp_path / "esp-idf"
    for submodule in ("components/lwip/lwip", "components/heap/tlsf"):
        (idf / submodule).mkdir(parents=True)
    (idf / "components" / "lwip" / "CMakeLists.txt").write_text(
        "set(include_dirs\n        include\n        lwip/src/include\n        port/include)\n"
        'set(srcs "lwip/src/api/api_lib.c" "apps/ping/ping.c")\n'
    )
    (idf / "components" / "heap" / "CMakeLists.txt").write_text(
        'list(APPEND includes "${COMPONENT_DIR}/tlsf/include" "tlsf")\nlist(APPEND srcs "tlsf/tlsf.c")\n'
    )
    (idf / "components" / "heap" / "tlsf" / "include").mkdir()  # already there: not printed again
    (idf / "components" / "heap" / "CMakeLists.txt").write_text(
        (idf / "components" / "heap" / "CMakeLists.txt").read_text() + 'set(extra "tlsf/port")\n'
    )
    (tmp_path / "parser.py").write_text(parser)
    result = subprocess.run(
        [
            "python3",
            str(tmp_path / "parser.py"),
            "--seed",
            str(idf),
            "components/lwip/lwip",
            "components/heap/tlsf",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.splitlines() == [
        "components/heap/tlsf/port dir",
        "components/lwip/lwip/src/include dir",
    ]


FAKE_BUILD_DOCS_MODULE = """
import subprocess
import sys


def main():
    command = [sys.executable, "-u", "-m", "sphinx.cmd.build", "-j", "1", "-b", "xml", "src", "out"]
    return subprocess.Popen(command).wait()
"""
FAKE_ADD_WARNINGS = """
def setup(app):
    app.append("add_warnings registered")
"""
FAKE_SPHINX_BUILD = """
import json
import sys


def main(argv):
    from esp_docs.generic_extensions import add_warnings

    app = []
    declared = add_warnings.setup(app)
    print(json.dumps({"argv": argv, "app": app, "declared": declared}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
"""
# The parts of Sphinx 7.1.2 the launcher's sphinx-build changes, as they behave there: a domain's
# data is its entry in the environment's domaindata, and the base Domain leaves merge_domaindata
# unimplemented (a parallel read calls it once per reader process, with the pages that process read).
FAKE_SPHINX_DOMAINS = """
import copy


class Domain:
    name = ""
    initial_data = {}

    def __init__(self, domaindata):
        self.data = domaindata.setdefault(self.name, copy.deepcopy(self.initial_data))

    def clear_doc(self, docname):
        pass

    def merge_domaindata(self, docnames, otherdata):
        raise NotImplementedError(
            f"merge_domaindata must be implemented in {self.__class__} to be able to do parallel builds!"
        )
"""
FAKE_SPHINX_REGISTRY = """
class SphinxComponentRegistry:
    def __init__(self):
        self.domains = {}

    def add_domain(self, domain, override=False):
        self.domains[domain.name] = domain
"""
FAKE_SPHINX_APPLICATION = """
from sphinx.registry import SphinxComponentRegistry


class Sphinx:
    def __init__(self, tags=()):
        self.registry = SphinxComponentRegistry()
        self.tags = set(tags)  # the builder's tags are the application's (Builder.tags = app.tags)
        self.listeners = {}

    def add_domain(self, domain, override=False):
        self.registry.add_domain(domain, override)

    def connect(self, event, callback):
        self.listeners.setdefault(event, []).append(callback)

    def emit(self, event):
        for callback in self.listeners.get(event, []):
            callback(self)

    def is_parallel_allowed(self, typ):
        return True  # every extension here declares itself parallel safe
"""
FAKE_SPHINX_LOGGING = """
import sys


class Logger:
    def warning(self, message, *args):
        print("WARNING: " + message % args, file=sys.stderr)


def getLogger(name):
    return Logger()
"""
SPHINX_STANDINS = {
    "sphinx/__init__.py": "",
    "sphinx/application.py": FAKE_SPHINX_APPLICATION,
    "sphinx/domains/__init__.py": FAKE_SPHINX_DOMAINS,
    "sphinx/registry.py": FAKE_SPHINX_REGISTRY,
    "sphinx/util/__init__.py": "",
    "sphinx/util/logging.py": FAKE_SPHINX_LOGGING,
    "sphinx/cmd/__init__.py": "",
    "sphinx/directives/__init__.py": "",
    "sphinx/directives/other.py": "class Only:\n    pass\n",
}


def launcher_source() -> str:
    script = SCRIPT.read_text()
    start = script.index("readonly BUILD_DOCS_LAUNCHER='\n") + len("readonly BUILD_DOCS_LAUNCHER='\n")
    return script[start : script.index("\n'\n", start)]


def write_modules(root: Path, modules: dict[str, str]) -> Path:
    for module, text in modules.items():
        (root / module).parent.mkdir(parents=True, exist_ok=True)
        (root / module).write_text(text)
    return root


@pytest.mark.parametrize("jobs", ["2", "1"])
def test_the_launcher_reads_in_parallel_only_with_add_warnings_declared_safe(
    tmp_path: Path, jobs: str
) -> None:
    """Sphinx reads serially when one extension's setup() declares nothing, as esp-docs 2.6's
    add_warnings does: the launcher's sphinx-build says it is parallel-read safe (with any -j: it also
    carries the breathe search every read uses).
    esp-docs and Sphinx live in the docs venv, so small stand-ins take their place here."""
    packages = write_modules(
        tmp_path / "site",
        {
            **SPHINX_STANDINS,
            "esp_docs/__init__.py": "",
            "esp_docs/build_docs.py": FAKE_BUILD_DOCS_MODULE,
            "esp_docs/generic_extensions/__init__.py": "",
            "esp_docs/generic_extensions/add_warnings.py": FAKE_ADD_WARNINGS,
            "sphinx/cmd/build.py": FAKE_SPHINX_BUILD,
        },
    )
    result = subprocess.run(
        [sys.executable, "-c", launcher_source(), jobs, "-t", "esp32"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(packages)},
        check=True,
    )
    seen = json.loads(result.stdout)
    assert seen["argv"] == ["-j", jobs, "-b", "xml", "src", "out"]
    assert seen["app"] == ["add_warnings registered"]
    assert seen["declared"] == {"parallel_read_safe": True, "parallel_write_safe": True}


def fake_domain_extension(class_name: str, domain_name: str, data_key: str) -> str:
    """An extension declared parallel safe whose domain has one data key and no merge of its own."""
    return f"""
from sphinx.domains import Domain


class {class_name}(Domain):
    name = "{domain_name}"
    initial_data = {{"{data_key}": {{}}}}


def setup(app):
    app.add_domain({class_name})
    return {{"parallel_read_safe": True, "parallel_write_safe": True}}
"""


# ESP-IDF v6.0's tools/cmakev2/esp_docs_cmakev2_extension.py: "xrefs" maps name -> (docname, label id).
FAKE_CMAKEV2_EXTENSION = fake_domain_extension("CMakeV2Domain", "cmakev2", "xrefs")
# Any other extension whose domain cannot merge.
FAKE_UNMERGEABLE_EXTENSION = fake_domain_extension("NotesDomain", "notes", "notes")
# sphinx_selective_exclude.eager_only as esp-docs loads it: it subclasses sphinx.directives.other.Only
# without importing that module, decides an only:: block while the page is read, and marks a kept
# block "TRUE" after adding that tag to the tags of the process reading.
FAKE_EAGER_ONLY = """
import sphinx


class EagerOnly(sphinx.directives.other.Only):
    @staticmethod
    def keep(tags, expression):
        tags.add("TRUE")
        return "TRUE" if expression in tags else None


def setup(app):
    return {"parallel_read_safe": True, "parallel_write_safe": True}
"""
# Reads the pages as Sphinx does (a cmakev2 directive writes xrefs[name] = (page, label id); each page
# has an ".. only:: esp32" block). Serial: each page is cleared, then read. Parallel: the main process
# clears every page, two reader processes each read their pages into a copy of its environment and
# its tags, and the main process merges each back. Then the main process writes: a block marked with
# an expression is kept when that expression is one of its tags.
FAKE_SPHINX_READ = """
import copy
import importlib
import json
import os
import sys

from sphinx.application import Sphinx

DECLARED = {
    "api-guides/build-system-v2": ["idf_build_library", "idf_component_register"],
    "api-guides/build-system": [],
    "index": [],
    "migration-guides/build-system": [],
}


def clear(domains, docname):
    for domain in domains.values():
        domain.clear_doc(docname)


def read(domains, tags, docname, only_blocks):
    for name in DECLARED[docname]:
        domains["cmakev2"].data["xrefs"][name] = (docname, f"cmakev2-function-{name}")
    if "sphinx_selective_exclude.eager_only" in os.environ["FAKE_EXTENSIONS"].split():
        eager_only = sys.modules["sphinx_selective_exclude.eager_only"]
        only_blocks[docname] = eager_only.EagerOnly.keep(tags, "esp32")


def main(argv):
    app = Sphinx(tags=["esp32", "xml"])
    for extension in os.environ["FAKE_EXTENSIONS"].split():
        importlib.import_module(extension).setup(app)
    app.emit("builder-inited")
    only_blocks = {}
    envdata = json.loads(os.environ["FAKE_EARLIER_DOMAINDATA"])
    domains = {name: domain(envdata) for name, domain in app.registry.domains.items()}
    parallel = app.is_parallel_allowed("read")
    docnames = sorted(DECLARED)
    if parallel:
        for docname in docnames:
            clear(domains, docname)
        for chunk in (docnames[:2], docnames[2:]):
            reader = copy.deepcopy(envdata)
            reader_domains = {name: domain(reader) for name, domain in app.registry.domains.items()}
            reader_tags = set(app.tags)
            for docname in chunk:
                read(reader_domains, reader_tags, docname, only_blocks)
            for name, domain in domains.items():
                domain.merge_domaindata(chunk, reader[name])
    else:
        for docname in docnames:
            clear(domains, docname)
            read(domains, app.tags, docname, only_blocks)
    written = sorted(page for page, expression in only_blocks.items() if expression in app.tags)
    print(json.dumps({"parallel": parallel, "xrefs": envdata["cmakev2"]["xrefs"], "only_kept": written}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
"""


def run_launched_sphinx_read(tmp_path: Path, extensions: str) -> subprocess.CompletedProcess[str]:
    """The launcher with -j 2, its sphinx-build reading through the stand-ins above."""
    packages = write_modules(
        tmp_path / "site",
        {
            **SPHINX_STANDINS,
            "esp_docs/__init__.py": "",
            "esp_docs/build_docs.py": FAKE_BUILD_DOCS_MODULE,
            "sphinx/cmd/build.py": FAKE_SPHINX_READ,
            "esp_docs_cmakev2_extension.py": FAKE_CMAKEV2_EXTENSION,
            "notes_extension.py": FAKE_UNMERGEABLE_EXTENSION,
            "sphinx_selective_exclude/__init__.py": "",
            "sphinx_selective_exclude/eager_only.py": FAKE_EAGER_ONLY,
        },
    )
    # an earlier build declared a name the page no longer declares: reading the page drops it
    earlier = {"cmakev2": {"xrefs": {"idf_removed": ["api-guides/build-system-v2", "cmakev2-function-x"]}}}
    return subprocess.run(
        [sys.executable, "-c", launcher_source(), "2", "-t", "esp32"],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": str(packages),
            "FAKE_EXTENSIONS": extensions,
            "FAKE_EARLIER_DOMAINDATA": json.dumps(earlier),
        },
        check=False,
    )


EXPECTED_CMAKEV2_XREFS = {
    "idf_build_library": ["api-guides/build-system-v2", "cmakev2-function-idf_build_library"],
    "idf_component_register": ["api-guides/build-system-v2", "cmakev2-function-idf_component_register"],
}


def test_the_launcher_merges_the_cmakev2_domain_of_a_parallel_read(tmp_path: Path) -> None:
    """ESP-IDF v6.0's cmakev2 extension declares itself parallel-read safe but its domain cannot
    merge, so a -j 2 read stopped with NotImplementedError; the launcher supplies the merge (and the
    clear) for that domain's one data key, and the merged data is what a serial read gives."""
    result = run_launched_sphinx_read(tmp_path, "esp_docs_cmakev2_extension")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"parallel": True, "xrefs": EXPECTED_CMAKEV2_XREFS, "only_kept": []}


def test_the_launcher_reads_serially_when_a_domain_cannot_merge(tmp_path: Path) -> None:
    result = run_launched_sphinx_read(tmp_path, "esp_docs_cmakev2_extension notes_extension")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"parallel": False, "xrefs": EXPECTED_CMAKEV2_XREFS, "only_kept": []}
    assert "the notes domain cannot merge data read in parallel: doing serial read" in result.stderr


def test_a_parallel_read_through_the_launcher_keeps_the_only_blocks_a_serial_read_keeps(
    tmp_path: Path,
) -> None:
    """esp-docs decides only:: blocks while reading and marks the kept ones "TRUE"; in a parallel read
    only the reader processes had that tag, so the writer turned every kept block into an empty
    comment (388 blocks of v6.0.2 esp32). The launcher gives the main process the tag."""
    result = run_launched_sphinx_read(
        tmp_path, "esp_docs_cmakev2_extension sphinx_selective_exclude.eager_only"
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["parallel"] is True
    assert seen["only_kept"] == sorted(
        ["api-guides/build-system-v2", "api-guides/build-system", "index", "migration-guides/build-system"]
    )


DOCS_PYTHON = os.environ.get("DOCS_VENV_PYTHON")
DOCS_IDF = os.environ.get("DOCS_IDF_PATH")


@pytest.mark.skipif(
    not DOCS_PYTHON or not DOCS_IDF or not (Path(DOCS_IDF) / "tools" / "cmakev2").is_dir(),
    reason="set DOCS_VENV_PYTHON (a docs venv's python, with Sphinx) and DOCS_IDF_PATH (ESP-IDF v6.0+)",
)
def test_a_real_parallel_read_with_the_cmakev2_domain_writes_what_a_serial_read_does(tmp_path: Path) -> None:
    """The real Sphinx, esp-docs' eager only:: and the tree's own cmakev2 extension: the API
    reference page includes the tree's tools/cmakev2/*.cmake, ten other pages refer to every name
    they declare and have an only:: block for the chip built and one for another; the launcher's
    sphinx-build reads with -j 2 in two processes and writes the same XML as a serial read."""
    script = SCRIPT.read_text()
    start = script.index('SPHINX_MAIN = """\n') + len('SPHINX_MAIN = """\n')
    sphinx_main = tmp_path / "sphinx_main.py"
    sphinx_main.write_text(script[start : script.index('"""\n', start)])
    cmakev2 = Path(str(DOCS_IDF)) / "tools" / "cmakev2"
    src = tmp_path / "src"
    (src / "api-guides").mkdir(parents=True)
    (src / "conf.py").write_text(
        f"import sys\nsys.path.append({str(cmakev2)!r})\n"
        "extensions = ['sphinx_selective_exclude.eager_only', 'esp_docs_cmakev2_extension']\n"
    )
    pages = [f"page{i}" for i in range(10)]
    toctree = "".join(f"   {page}\n" for page in ["api-guides/build-system-v2", *pages])
    (src / "index.rst").write_text(f"Index\n=====\n\n.. toctree::\n\n{toctree}")
    includes = "".join(f".. cmakev2:include:: /cmake/{f.name}\n" for f in sorted(cmakev2.glob("*.cmake")))
    shutil.copytree(cmakev2, src / "cmake", ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (src / "api-guides" / "build-system-v2.rst").write_text(
        "Build System v2\n===============\n\n.. _cmakev2_variables:\n\nVariables\n---------\n\n"
        ".. _cmakev2_functions:\n\nFunctions\n---------\n\n.. _cmakev2_macros:\n\nMacros\n------\n\n"
        + includes
    )
    names = sorted(
        {
            line.split("::", 1)[1].strip()
            for path in cmakev2.glob("*.cmake")
            for line in path.read_text().splitlines()
            if line.startswith(".. cmakev2:") and "::" in line and not line.startswith(".. cmakev2:include")
        }
    )
    refs = "".join(f"See :cmakev2:ref:`{name}`.\n\n" for name in names)
    refs += ".. only:: esp32\n\n    Kept for esp32.\n\n.. only:: esp32c3\n\n    Dropped for esp32.\n"
    for page in pages:
        (src / f"{page}.rst").write_text(f"{page}\n{'=' * len(page)}\n\n{refs}")

    def build(out: str, *command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(DOCS_PYTHON), *command, "-t", "esp32", "-b", "xml", str(src), str(tmp_path / out)],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )

    serial = build("serial", "-m", "sphinx.cmd.build", "-j", "1")
    assert serial.returncode == 0, serial.stderr
    parallel = build("parallel", str(sphinx_main), "-j", "2")
    assert parallel.returncode == 0, parallel.stderr
    assert re.search(r"reading sources\.\.\. \[\s*\d+%\] \S+ \.\. \S+", parallel.stdout), parallel.stdout
    written = sorted(p.relative_to(tmp_path / "serial") for p in (tmp_path / "serial").rglob("*.xml"))
    assert len(written) == 12
    for page in written:
        assert (tmp_path / "parallel" / page).read_bytes() == (tmp_path / "serial" / page).read_bytes(), page
    page9 = (tmp_path / "parallel" / "page9.xml").read_text()
    assert page9.count('refuri="api-guides/build-system-v2#cmakev2-') > 0  # the merged xrefs resolve
    assert "Kept for esp32" in page9 and "Dropped" not in page9


BREATHE_HEADERS = {
    "point.h": """/** @file point.h */
/** @brief Adds two numbers. */
int add(int a, int b);
/** @brief A point. */
typedef struct { int x; int y; } point_t;
/** @brief A pair. */
struct pair { int a; /**< first */ int b; /**< second */ };
/** @brief A word. */
union word { int i; float f; };
/** @brief Colours. */
enum colour { RED, /**< red */ GREEN /**< green */ };
/** @brief The limit. */
#define LIMIT 3
/** @brief A counter. */
extern int counter;
""",
    "more.h": """/** @file more.h */
/** @defgroup helpers Helpers
 *  @{ */
/** @brief Adds three numbers; the same name in another header. */
int add(int a, int b, int c);
/** @brief A function in a group. */
void grouped(void);
/** @} */
""",
}
BREATHE_PAGE = """Page
====

.. doxygenfunction:: add(int a, int b)
.. doxygenfunction:: add(int a, int b, int c)
.. doxygenfunction:: grouped
.. doxygenstruct:: pair
   :members:
.. doxygenunion:: word
.. doxygenenum:: colour
.. doxygendefine:: LIMIT
.. doxygentypedef:: point_t
.. doxygenvariable:: counter
.. doxygenfunction:: not_declared_anywhere
"""


@pytest.mark.skipif(
    not DOCS_PYTHON or shutil.which("doxygen") is None,
    reason="set DOCS_VENV_PYTHON (a docs venv's python, with Sphinx and breathe); needs doxygen",
)
def test_the_launchers_name_indexed_breathe_search_writes_what_the_whole_walk_does(tmp_path: Path) -> None:
    """Real doxygen, Sphinx and breathe: a page with every directive whose search the launcher
    narrows to the compounds of index.xml holding the name (functions of one name in two headers,
    one in a group, a struct, union, enum, define, typedef, variable and a name nothing declares) is
    written the same by the launcher's sphinx-build as by the plain one."""
    script = SCRIPT.read_text()
    start = script.index('SPHINX_MAIN = """\n') + len('SPHINX_MAIN = """\n')
    sphinx_main = tmp_path / "sphinx_main.py"
    sphinx_main.write_text(script[start : script.index('"""\n', start)])
    headers = tmp_path / "include"
    headers.mkdir()
    for name, text in BREATHE_HEADERS.items():
        (headers / name).write_text(text)
    (tmp_path / "Doxyfile").write_text(
        f"INPUT = {headers}\nGENERATE_XML = YES\nGENERATE_HTML = NO\nGENERATE_LATEX = NO\n"
        f"OUTPUT_DIRECTORY = {tmp_path / 'doxygen'}\nQUIET = YES\n"
    )
    subprocess.run(["doxygen", str(tmp_path / "Doxyfile")], cwd=tmp_path, check=True, capture_output=True)
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        "extensions = ['breathe']\n"
        f"breathe_projects = {{'p': {str(tmp_path / 'doxygen' / 'xml')!r}}}\nbreathe_default_project = 'p'\n"
    )
    (src / "index.rst").write_text(BREATHE_PAGE)

    def build(out: str, *command: str) -> str:
        done = subprocess.run(
            [str(DOCS_PYTHON), *command, "-j", "1", "-b", "xml", str(src), str(tmp_path / out)],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        return done.stderr

    plain = build("plain", "-m", "sphinx.cmd.build")
    launched = build("launched", str(sphinx_main))
    page = (tmp_path / "launched" / "index.xml").read_text()
    assert page == (tmp_path / "plain" / "index.xml").read_text()
    for shown in ("add", "grouped", "pair", "word", "colour", "LIMIT", "point_t", "counter"):
        assert shown in page, shown
    assert page.count("<desc_name ") >= 9, "each directive found its node"
    assert "Cannot find function" in plain and "Cannot find function" in launched


def test_the_phase_timer_starts_writing_after_reading(tmp_path: Path) -> None:
    """Sphinx's message catalog step says "writing output..." before any page is read; taken as the
    write phase, the whole read and write would be booked as reading."""
    script = SCRIPT.read_text()
    start = script.index("readonly PHASE_TIMER='\n") + len("readonly PHASE_TIMER='\n")
    timer = script[start : script.index("\n'\n", start)].replace("'\"'\"'", "'")
    log = "\n".join(
        [
            "en/esp32: Running CMake on dummy project...",
            "en/esp32: building [mo]: targets for 0 po files that are out of date",
            "en/esp32: writing output... ",
            "en/esp32: reading sources... [  0%] 404",
            "en/esp32: writing output... [ 50%] COPYRIGHT .. about",
        ]
    )
    phases = tmp_path / "esp32.phases"
    subprocess.run([sys.executable, "-c", timer, str(phases)], input=log, text=True, check=True)
    assert [line.split()[0] for line in phases.read_text().splitlines()] == [
        "setup",
        "configure",
        "read",
        "write",
    ]


def test_the_build_status_names_the_last_sphinx_phase_behind_a_flood_of_warnings(tmp_path: Path) -> None:
    """After the read, Sphinx prints hundreds of warnings before its first write line: the
    "still building" status must still say the read is done, not fall back to "configuring"."""
    script = SCRIPT.read_text()
    start = script.index("build_phase() {")
    function = script[start : script.index("\n}\n", start) + 3]
    logs = tmp_path / "logs"
    logs.mkdir()
    warning = (
        "en/esp32: /idf/docs/en/api-guides/lwip.rst:2: WARNING: IDF path src/x.h does not appear to exist\n"
    )
    (logs / "esp32.log").write_text(
        "en/esp32: Running CMake on dummy project...\n"
        "en/esp32: reading sources... [ 99%] api-reference/x .. versions\n"
        "en/esp32: reading sources... [100%] migration-guides/y .. versions\n" + warning * 200
    )

    def status(target: str) -> str:
        run = subprocess.run(
            ["bash", "-c", f'{function}\nbuild_phase "$1"', "bash", target],
            env={**os.environ, "WORK_DIR": str(tmp_path)},
            capture_output=True,
            text=True,
            check=True,
        )
        return run.stdout.strip()

    assert status("esp32") == "reading sources... [100%]"
    assert status("esp32s3") == "configuring and running doxygen"  # no log yet
