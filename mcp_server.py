"""MCP server: ESP32 documentation search per chip and silicon revision, for coding agents.

    uv run mcp_server.py --demo                  # a small real TRM sample, built on first use
    uv run mcp_server.py --db ./esp_docs.lancedb # the full store (or $ESP32_DOCS_DB)
    uv run mcp_server.py --db s3://bucket/prefix/esp_docs.lancedb  # served from object storage
    uv run mcp_server.py --transport http        # streamable HTTP on 127.0.0.1
    ESP32_DOCS_TOKEN=... uv run mcp_server.py --transport http --host 0.0.0.0 --allowed-host buildbox
                                                 # a team server: bearer token required off loopback
    uv run mcp_server.py --project ~/blink       # default chip/revision from that ESP-IDF project

Results default to the chip and silicon revision of the ESP-IDF project the server is scoped to
(project_scope.py): a tool's project_dir, else --project / $ESP32_DOCS_PROJECT, else the directory
the client started the server in.

The model and table load once at start-up, so every call answers in milliseconds. Errors are raised
as the SDK's ToolError: any other exception reaches the agent as a bare "Error executing tool",
and the agent would never learn which values are valid.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

import http_security
import project_scope
import registers
from chip_vocab import chip_ids, normalize_chip
from embedder import user_cache_dir
from process_memory import limit_arenas
from project_scope import Applied, ScopeResolver
from results import FIRST_RESULT_SHARE, RESULT_TEXT_CHARS, without_empty
from search import (
    MAX_EXCERPT_CHARS,
    MAX_K,
    MIN_EXCERPT_CHARS,
    READ_DEFAULT_CHARS,
    READ_MAX_CHARS,
    SearchEngine,
    SearchInputError,
    open_engine,
)
from store import resolve_db_uri
from store_watch import DEFAULT_REFRESH_SECONDS, StoreUnavailable, StoreWatch

SAMPLES_DIR = Path(__file__).with_name("samples")
DEMO_CHUNKS = SAMPLES_DIR / "esp32c3_trm_sample.jsonl"
DEMO_SOURCE_NOTE = SAMPLES_DIR / "SOURCE.md"
DEMO_NOTE = (
    "DEMO SAMPLE: results come from a small excerpt of the ESP32-C3 Technical Reference Manual "
    "(UART, IO MUX/GPIO, SYSTIMER, LED PWM and AES chapters) only, not the full documentation store"
)
READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
INSTRUCTIONS = (
    "Search ESP32 documentation (ESP-IDF docs 'idf', Technical Reference Manuals 'trm', SoC headers "
    "'src') per chip and silicon revision. Register addresses and API details differ between chips, so "
    "results default to the chip and revision of the user's ESP-IDF project (its sdkconfig), and each "
    "result's 'scope' says which and from where. If your working directory is not the server's own "
    "project, call esp32_docs_scope(project_dir=<your working directory>) once and pass that project_dir "
    "on later calls. chip= and revision= always override the scope; chip='any' searches every chip. "
    "ESP-IDF APIs and Kconfig options differ between releases: results come from the project's ESP-IDF "
    "release when the store holds it (each result's 'release' says which, and what else is held); "
    "idf_version= (5.5, v6.0, master, or 'all' to compare) overrides it. "
    "Use esp32_docs_find_symbol for exact identifiers, "
    "esp32_docs_register for a register's exact address, reset value and bit fields (or what lives at an "
    "address, or how a register differs between chips / ESP32-P4 revisions), esp32_docs_read to see more "
    "around a hit, esp32_docs_list_chips for valid chips and coverage. A result's doc_refs are the "
    "sections it links to (esp32_docs_read with file_path and section_path) and the registers it names "
    "(esp32_docs_register with name); file_refs are ESP-IDF source files, read at their url."
)

CHIP_HELP = f"chip id or name, e.g. esp32c3 or ESP32-C3; one of: {', '.join(chip_ids())}"
ChipArg = Annotated[
    str | None,
    Field(description=f"{CHIP_HELP}; default: the project scope's chip; 'any' turns the scope off"),
]
ProjectDirArg = Annotated[
    str | None,
    Field(
        description="absolute path of the ESP-IDF project you work in (your working directory); "
        "default: the server's --project, $ESP32_DOCS_PROJECT, or the directory it was started in"
    ),
]
OVERRIDE_HELP = (
    "Pass chip= and revision= on any call to override this scope for that call; chip='any' searches "
    "every chip. project_dir= scopes one call to another project. The server's default project is "
    "--project DIR or $ESP32_DOCS_PROJECT, else the directory the client started it in. The ESP-IDF "
    "release is reported, not yet a filter."
)
IdfVersionArg = Annotated[
    str | None,
    Field(
        description="ESP-IDF release: 5.5, v5.5, v5.5.5, release/v5.5, master, or 'all' to compare releases; "
        "default: the project's release when the store holds it, else the store's default (see 'release')"
    ),
]
DocTypeArg = Annotated[
    str | None, Field(description="idf = ESP-IDF docs, trm = Technical Reference Manual, src = SoC headers")
]


QueryArg = Annotated[
    str, Field(description="a question or an identifier, e.g. 'UART baud rate' or 'GPIO_PIN_MUX_REG'")
]
SearchRevisionArg = Annotated[
    str | None,
    Field(
        description="silicon revision, e.g. v1.3 or mainline (ESP32-P4); "
        "content without a revision axis always stays; default: the project scope's; 'any' for none"
    ),
]
KArg = Annotated[int, Field(ge=1, le=MAX_K, description=f"results to return, 1-{MAX_K}")]
ExcerptCharsArg = Annotated[
    int | None,
    Field(
        ge=MIN_EXCERPT_CHARS,
        le=MAX_EXCERPT_CHARS,
        description=f"characters of text per result, {MIN_EXCERPT_CHARS}-{MAX_EXCERPT_CHARS}; default "
        f"{RESULT_TEXT_CHARS} ({RESULT_TEXT_CHARS * FIRST_RESULT_SHARE} for a search's first result); "
        "fewer keeps an answer small (the heading, a register's address and reset, "
        "and the lines that match stay), more shows more of each passage",
    ),
]
SymbolArg = Annotated[
    str,
    Field(
        description="identifier, case-insensitive; * is a wildcard (LEDC_CH*_CONF0_REG); "
        "AES_KEY_3_REG also finds AES_KEY_n_REG"
    ),
]
RegisterChipArg = Annotated[str | None, Field(description=f"{CHIP_HELP}; default: the project scope's chip")]
RegisterNameArg = Annotated[
    str | None,
    Field(
        description="register name, e.g. UART_CLKDIV_REG; a numbered instance (AES_KEY_3_REG) "
        "resolves to the manual's AES_KEY_n_REG; a field name answers with its register"
    ),
]
AddressArg = Annotated[
    int | str | None,
    Field(
        description="instead of name: an absolute 32-bit, 4-byte aligned address (0x60000014), "
        "or an offset (0x14) together with peripheral"
    ),
]
RegisterRevisionArg = Annotated[
    str | None,
    Field(
        description="silicon revision for ESP32-P4: mainline or v1.3; default: the project "
        "scope's, else mainline"
    ),
]
CompareWithArg = Annotated[
    str | None,
    Field(
        description="another chip (esp32c6) or the other ESP32-P4 revision (v1.3, or esp32p4:v1.3): "
        "adds the fields added, removed and changed there"
    ),
]
PeripheralArg = Annotated[
    str | None,
    Field(description="with an offset address: the register name prefix, e.g. UART or LEDC"),
]
CompareReleaseArg = Annotated[
    str | None,
    Field(
        description="another ESP-IDF release (5.5, v5.5, v5.5.5, release/v5.5, master): adds "
        "compare_release, the register's SoC-header fields added, removed and changed there "
        "(bits, access, default), its address and reset, or that it is absent there"
    ),
]
FilePathArg = Annotated[
    str, Field(description="file_path copied from a search or find_symbol result, or a doc_refs entry")
]
ChunkIndexArg = Annotated[int | None, Field(ge=0, description="chunk_index of that result")]
SectionPathArg = Annotated[
    str | None, Field(description="instead of chunk_index: section_path of a doc_refs entry")
]
BeforeArg = Annotated[int, Field(ge=0, le=50, description="chunks to include before it")]
AfterArg = Annotated[int, Field(ge=0, le=50, description="chunks to include after it")]
MaxCharsArg = Annotated[
    int, Field(ge=500, le=READ_MAX_CHARS, description="character budget for all returned text")
]
WholeSectionArg = Annotated[
    bool,
    Field(description="return the hit's whole section (and subsections) instead of before/after"),
]


def demo_db_uri() -> Path:
    """Cache location keyed by the sample's content, so an edited sample rebuilds."""
    digest = hashlib.sha256(DEMO_CHUNKS.read_bytes()).hexdigest()[:12]
    return user_cache_dir() / f"demo-{digest}.lancedb"


def ensure_demo_store() -> Path:
    """Build the demo store on first use: into a temporary directory, then one atomic rename."""
    target = demo_db_uri()
    if target.is_dir():
        return target
    import embed_and_store  # the build stage: only the demo's first start needs it
    from embedder import get_embedder

    target.parent.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in DEMO_CHUNKS.read_text(encoding="utf-8").splitlines() if line]
    texts = sum(len(embed_and_store.embedding_texts({"doc_type": "trm", **row})) for row in rows)
    print(
        f"demo store: first start: embedding the sample's {len(rows)} chunks as {texts} texts (a "
        "register's fields and windows have vectors of their own, as in the full store), about 20 s "
        f"on two cores; later starts reuse {target}",
        file=sys.stderr,
    )
    staging = Path(tempfile.mkdtemp(prefix=".demo-build-", dir=target.parent))
    try:
        source = staging / "source"  # outside any git tree: its SOURCE.md pins the sample's commit
        source.mkdir()
        shutil.copyfile(DEMO_SOURCE_NOTE, source / "SOURCE.md")
        summary = embed_and_store.build([DEMO_CHUNKS], "trm", source, str(staging / "db"), get_embedder)
        print(f"demo store: {summary.line()}", file=sys.stderr)
        try:
            os.replace(staging / "db", target)
        except OSError:
            if not target.is_dir():  # another server won the race only if the target now exists
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


class DocsTools:
    """The six read-only tools over ``engine``: a fixed one (the demo), or a StoreWatch that hands each
    call the engine of one whole table version, follows refreshes and reports a store that is gone.

    Each tool is one method whose signature is its argument schema (the SDK validates arguments
    against it) and whose docstring is its description; ``answer`` and ``scoped`` turn every refusal
    into the SDK's ToolError and fill the chip and revision a call leaves out from the project scope.
    """

    def __init__(self, engine: SearchEngine | StoreWatch, resolver: ScopeResolver) -> None:
        self.engine = engine
        self.resolver = resolver

    def tools(self) -> list[Callable[..., dict[str, Any]]]:
        """The tools in the order clients list them."""
        return [
            self.esp32_docs_search,
            self.esp32_docs_find_symbol,
            self.esp32_docs_register,
            self.esp32_docs_list_chips,
            self.esp32_docs_read,
            self.esp32_docs_scope,
        ]

    def answer(self, call: Callable[[SearchEngine], dict[str, Any]]) -> dict[str, Any]:
        """Run ``call`` on the engine serving now; a caller's bad input or a store gone under the
        server reaches the agent as a ToolError naming what is valid or what happened."""
        watch = self.engine if isinstance(self.engine, StoreWatch) else None
        try:
            current = watch.engine() if watch else self.engine  # once per call: one whole table version
        except StoreUnavailable as error:
            raise ToolError(str(error)) from error
        try:
            return call(current)
        except SearchInputError as error:
            raise ToolError(str(error)) from error
        except ToolError:
            raise
        except Exception as error:
            # a store deleted or corrupted under the server: say so rather than "Error executing tool"
            problem = watch.check_after_failure() if watch else None
            if problem is None:
                raise
            raise ToolError(problem) from error

    def scoped(
        self,
        project_dir: str | None,
        chip: str | None,
        revision: str | None,
        call: Callable[[SearchEngine, Applied], dict[str, Any]],
    ) -> dict[str, Any]:
        """Run ``call`` with the project scope filling the chip/revision the caller left out."""
        applied = project_scope.apply(self.resolver.resolve(project_dir), chip, revision)

        def run(engine: SearchEngine) -> dict[str, Any]:
            try:
                payload = call(engine, applied)
            except (SearchInputError, ToolError) as error:
                if not applied.from_scope:
                    raise
                where = applied.envelope["project_dir"]
                raise ToolError(
                    f"{error} ({applied.envelope['how']} in {where}; pass chip=, revision=, or "
                    "chip='any' to override it)"
                ) from error
            # a call may state the scope it really used (read's fallback); it goes first either way,
            # once per answer, without the fields that say nothing (which filters applied always stays)
            scope = without_empty(payload.pop("scope", applied.envelope), frozenset(("applied",)))
            if not scope.get("projects_found"):  # the note names the folder where none was found
                scope.pop("project_dir_from", None)
                scope.pop("project_dir", None)
            return {"scope": scope, **payload}

        return self.answer(run)

    def esp32_docs_search(
        self,
        query: QueryArg,
        doc_type: DocTypeArg = None,
        chip: ChipArg = None,
        revision: SearchRevisionArg = None,
        k: KArg = 5,
        idf_version: IdfVersionArg = None,
        project_dir: ProjectDirArg = None,
        excerpt_chars: ExcerptCharsArg = None,
    ) -> dict[str, Any]:
        """Hybrid search (meaning + keywords + exact symbols) over ESP32 docs, by chip/doc_type/revision
        and ESP-IDF release. Without chip=, answers for the project scope's chip and revision (see the
        result's scope); idf_version='all' lists each passage's releases, to compare them. Without a chip,
        a section's copies for other chips fold into one result: chip_variants names them and the text
        ends with the lines each copy has of its own."""
        return self.scoped(
            project_dir,
            chip,
            revision,
            lambda e, a: e.search(
                query,
                doc_type=doc_type,
                chip=a.chip,
                revision=a.revision,
                k=k,
                idf_version=idf_version,
                project_release=a.release,
                excerpt_chars=excerpt_chars,
            ),
        )

    def esp32_docs_find_symbol(
        self,
        symbol: SymbolArg,
        chip: ChipArg = None,
        doc_type: DocTypeArg = None,
        k: KArg = 10,
        idf_version: IdfVersionArg = None,
        project_dir: ProjectDirArg = None,
        excerpt_chars: ExcerptCharsArg = None,
    ) -> dict[str, Any]:
        """Exact symbol lookup (functions, types, macros, registers, fields, Kconfig) across all corpora.
        Without chip=, within the project scope's chip. by_release says in which ESP-IDF releases the
        symbol exists; when it is gone from one, migration_guides holds the passages that name it."""
        return self.scoped(
            project_dir,
            chip,
            None,
            lambda e, a: e.find_symbol(
                symbol,
                chip=a.chip,
                doc_type=doc_type,
                k=k,
                idf_version=idf_version,
                project_release=a.release,
                excerpt_chars=excerpt_chars,
            ),
        )

    def esp32_docs_register(
        self,
        chip: RegisterChipArg = None,
        name: RegisterNameArg = None,
        address: AddressArg = None,
        revision: RegisterRevisionArg = None,
        compare_with: CompareWithArg = None,
        peripheral: PeripheralArg = None,
        idf_version: IdfVersionArg = None,
        compare_release: CompareReleaseArg = None,
        project_dir: ProjectDirArg = None,
    ) -> dict[str, Any]:
        """Exact facts about one hardware register as JSON, merged from the Technical Reference Manual
        and the ESP-IDF SoC headers: documented offset and absolute address, reset value (reset_from
        says whether the manual gives it or it is composed from field defaults), bit fields (bits,
        access, reset, description, sources), the manual chapter, the header #defines, and
        `disagreements` where manual and headers differ (reset, bits, access, default, a field only
        one side has or renamed) -- check it before trusting a value. Answers for registers only the
        headers describe too. Use it instead of search when you need a register's address, reset
        value or field layout; to find which register is at an address; or to compare a register
        between chips, between ESP32-P4 revisions (v1.3 vs mainline) or between ESP-IDF releases
        (compare_release). Give name or address; chip defaults to the project scope's. Without
        idf_version, other_releases says when another held release's header differs."""

        def lookup(engine: SearchEngine, applied: Applied) -> dict[str, Any]:
            if applied.chip is None:
                raise ToolError(
                    f"chip is required: {applied.envelope['how']}; valid chips: {', '.join(chip_ids())}"
                )
            # registers caches each chip's parsed index per table version: the first call for a chip
            # pays for it (0.1-0.8 s on the full store), later calls answer in milliseconds; the
            # headers of one ESP-IDF release answer (its SoC headers change between releases)
            release = engine.release_for(idf_version, normalize_chip(applied.chip), applied.release)
            try:
                answer = registers.lookup_register(
                    engine.table,
                    applied.chip,
                    name=name,
                    address=address,
                    revision=applied.revision,
                    compare_with=compare_with,
                    peripheral=peripheral,
                    release=release.series,
                    compare_release=compare_release,
                    held=engine.index.releases,
                    # the caller did not name the release: say when another one's header differs
                    note_other_releases=idf_version is None,
                )
            except ValueError as error:  # registers' messages name the valid values
                raise ToolError(str(error)) from error
            return {**answer, "release": release.envelope}

        return self.scoped(project_dir, chip, revision, lookup)

    def esp32_docs_list_chips(self) -> dict[str, Any]:
        """The valid chips, doc_types and revisions, with how many chunks each corpus holds per chip, and
        the ESP-IDF releases the store holds with the chips built for each, and the manifest of the
        bundle the store was installed from (what it was built from, its counts and dev figures)."""
        import bundle  # packing and installing code, loaded by the one tool that shows a manifest

        watch = self.engine if isinstance(self.engine, StoreWatch) else None

        def listing(current: SearchEngine) -> dict[str, Any]:
            # an installed or published store carries its bundle manifest (bundle.py); None otherwise
            manifest = bundle.served_manifest(watch.db_uri, current.table.version) if watch else None
            return {**current.list_chips(), "bundle": manifest}

        return self.answer(listing)

    def esp32_docs_read(
        self,
        file_path: FilePathArg,
        chunk_index: ChunkIndexArg = None,
        section_path: SectionPathArg = None,
        before: BeforeArg = 1,
        after: AfterArg = 1,
        max_chars: MaxCharsArg = READ_DEFAULT_CHARS,
        whole_section: WholeSectionArg = False,
        chip: ChipArg = None,
        idf_version: IdfVersionArg = None,
        project_dir: ProjectDirArg = None,
    ) -> dict[str, Any]:
        """Read the chunks around a hit, or its whole section, in document order within a character budget;
        or the section a result's doc_refs entry names (file_path + section_path)."""

        def read(engine: SearchEngine, applied: Applied) -> dict[str, Any]:
            def window(chip_id: str | None) -> dict[str, Any]:
                return engine.read(
                    file_path,
                    chunk_index,
                    section_path=section_path,
                    before=before,
                    after=after,
                    max_chars=max_chars,
                    whole_section=whole_section,
                    chip=chip_id,
                    idf_version=idf_version,
                    project_release=applied.release,
                )

            try:
                return window(applied.chip)
            except SearchInputError:
                if not applied.from_scope:
                    raise
            # a hit from a call scoped otherwise (chip='any'): read it as it is rather than fail
            payload = window(None)
            envelope = {**applied.envelope, "applied": {"chip": None, "revision": None}}
            where = f"section {section_path!r}" if section_path is not None else f"chunk {chunk_index}"
            envelope["how"] = (
                f"{file_path} has no {where} for the project's chip {applied.chip}; "
                "read without a chip filter"
            )
            return {"scope": envelope, **payload}

        return self.scoped(project_dir, chip, None, read)

    def esp32_docs_scope(self, project_dir: ProjectDirArg = None) -> dict[str, Any]:
        """The chip, silicon revision range and ESP-IDF release of the ESP-IDF project in project_dir
        (default: the server's project), the file each came from, notes on anything ambiguous, and how
        to override them. Call it once with your working directory when that is not the server's."""
        return {**self.resolver.resolve(project_dir).as_dict(), "override": OVERRIDE_HELP}


class DocsServer(MCPServer):
    """The SDK's server, with two changes to what a client receives: a call whose arguments do not
    fit the tool's schema is refused in the words of every other refusal (``argument_error``), never
    as the validation library's dump; and an answer's text is compact JSON (the SDK indents it, which
    made up about a sixth of a search answer's bytes, all paid from the agent's context)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            result = await super().call_tool(name, arguments, context)
        except ToolError as error:
            cause = error.__cause__
            tool = self._tool_manager.get_tool(name)
            if not isinstance(cause, ValidationError) or tool is None:
                raise
            raise ToolError(
                f"Error executing tool {name}: {argument_error(tool.parameters, cause)}"
            ) from cause
        if not isinstance(result, CallToolResult) or result.structured_content is None:
            return result
        text = json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
        return result.model_copy(update={"content": [TextContent(type="text", text=text)]})


def argument_error(schema: dict[str, Any], error: ValidationError) -> str:
    """What is wrong with each rejected argument and what is valid, read from the tool's own input
    schema: ``k must be an integer from 1 to 20, got 0``, as the engine's own checks word it."""
    properties = schema.get("properties", {})
    problems = []
    for name in dict.fromkeys(str(detail["loc"][0]) for detail in error.errors() if detail["loc"]):
        spec = properties.get(name, {})
        detail = next(d for d in error.errors() if d["loc"] and str(d["loc"][0]) == name)
        if detail["type"] == "missing":
            problems.append(f"{name} is required: {spec.get('description', 'see the tool schema')}")
            continue
        shown = repr(detail["input"])
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        problems.append(f"{name} must be {valid_values(spec)}, got {shown}")
    return "; ".join(problems) or "the arguments do not fit the tool's input schema"


def valid_values(spec: dict[str, Any]) -> str:
    """An argument's valid values in words, from its JSON schema: its types and integer range."""
    kinds = []
    for option in spec.get("anyOf", [spec]):
        kind = option.get("type")
        low, high = option.get("minimum", spec.get("minimum")), option.get("maximum", spec.get("maximum"))
        if kind == "integer" and low is not None and high is not None:
            kinds.append(f"an integer from {low} to {high}")
        elif kind == "integer" and low is not None:
            kinds.append(f"an integer of at least {low}")
        elif kind == "integer":
            kinds.append("an integer")
        elif kind == "boolean":
            kinds.append("true or false")
        elif kind == "string":
            kinds.append("a string")
    optional = any(option.get("type") == "null" for option in spec.get("anyOf", []))
    text = " or ".join(kinds) or "a value the tool schema allows"
    return text + (" (or left out)" if optional else "")


def create_server(
    engine: SearchEngine | StoreWatch,
    scopes: ScopeResolver | None = None,
    auth: tuple[AuthSettings, TokenVerifier] | None = None,
) -> MCPServer:
    """The MCP server with the six read-only tools of DocsTools over ``engine``.

    ``auth`` (HTTP only) makes the SDK's bearer middleware answer 401 to any request without the token.
    """
    settings, verifier = auth if auth else (None, None)
    server = DocsServer("esp32-docs", instructions=INSTRUCTIONS, auth=settings, token_verifier=verifier)
    tools = DocsTools(engine, scopes or ScopeResolver(*project_scope.configured_project(None)))
    for tool in tools.tools():
        server.add_tool(tool, annotations=READ_ONLY, structured_output=True)
    return server


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Serve ESP32 documentation search over MCP.")
    parser.add_argument(
        "--db",
        help="store directory or LanceDB URI, e.g. s3://bucket/prefix/esp_docs.lancedb (credentials and "
        "endpoint from AWS_* variables; docs/team-server.md) (default $ESP32_DOCS_DB or ./esp_docs.lancedb)",
    )
    parser.add_argument(
        "--demo", action="store_true", help="serve the bundled TRM sample (built on first use)"
    )
    parser.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio: one client that starts the server (default); http: streamable HTTP on --host/--port "
        "for clients that connect (a token is required off loopback)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address for --transport http")
    parser.add_argument("--port", type=int, default=8765, help="port for --transport http")
    parser.add_argument(
        "--token-file",
        help="file holding the bearer token every HTTP request must carry (else "
        f"${http_security.TOKEN_ENV_VAR}); required for any --host but loopback",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name or address clients use to reach the server (Host/Origin headers are checked "
        "against loopback, --host and these); repeatable",
    )
    parser.add_argument(
        "--refresh-seconds",
        type=float,
        default=DEFAULT_REFRESH_SECONDS,
        help="how often to check for a store rebuilt under the running server; a new table version is "
        "served, whole, once it is loaded (default %(default)s)",
    )
    parser.add_argument(
        "--project",
        help=f"the ESP-IDF project whose chip and revision are the default scope (default "
        f"${project_scope.PROJECT_ENV_VAR}, else the directory the server is started in)",
    )
    args = parser.parse_args(argv)
    if args.demo and args.db:
        parser.error("--demo serves the bundled sample; drop --db")
    if not args.refresh_seconds > 0:
        parser.error("--refresh-seconds must be a positive number of seconds, e.g. 5")
    args.token = None
    if args.transport == "http":
        try:
            args.token = http_security.load_token(args.token_file)
            http_security.require_token_off_loopback(args.host, args.token)
        except http_security.ExposureError as error:
            parser.error(str(error))
    return args


def load_engine(args: argparse.Namespace) -> tuple[SearchEngine | StoreWatch, SearchEngine | None]:
    """The demo's fixed engine, or a StoreWatch over --db (a missing store is reported by every tool and
    picked up once it appears); and the engine serving now, if any."""
    if args.demo:
        engine = open_engine(str(ensure_demo_store()), demo_note=DEMO_NOTE)
        return engine, engine
    watch = StoreWatch(resolve_db_uri(args.db), open_engine, interval=args.refresh_seconds)
    try:
        current = watch.engine()
    except StoreUnavailable as error:
        print(error, file=sys.stderr)
        current = None
    watch.start()
    return watch, current


def prepare_project_registers(engine: SearchEngine, scopes: ScopeResolver) -> threading.Thread | None:
    """Build the register index and address map of the project's chip in the background, so the
    agent's first register lookup answers in milliseconds rather than paying up to ~1.5 s for it.
    Only the project's chip: all thirteen would cost ~9 s of CPU and ~130 MiB."""
    applied = project_scope.apply(scopes.resolve(None), None, None)
    if applied.chip is None:
        return None
    chip = normalize_chip(applied.chip)

    def prepare() -> None:
        started = time.monotonic()
        try:
            release = engine.release_for(None, chip, applied.release)
            count = registers.prepare_chip(engine.table, chip, applied.revision, release.series)
        except (ValueError, SearchInputError) as error:  # a chip or revision the store does not hold
            print(f"mcp_server: register map of {chip} not prepared: {error}", file=sys.stderr)
            return
        print(
            f"mcp_server: register map of {chip} (project scope) ready, {count} addresses, "
            f"in {time.monotonic() - started:.1f} s",
            file=sys.stderr,
        )

    thread = threading.Thread(target=prepare, name="prepare-registers", daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    limit_arenas()  # before the engine's threads start allocating (process_memory.py says why)
    source, engine = load_engine(args)
    scopes = ScopeResolver(*project_scope.configured_project(args.project))
    if engine is not None:
        prepare_project_registers(engine, scopes)
    token = args.token
    auth = (
        (http_security.auth_settings(args.host, args.port), http_security.StaticTokenVerifier(token))
        if token
        else None
    )
    server = create_server(source, scopes, auth)
    if engine is not None:
        counts = ", ".join(f"{doc}={n}" for doc, n in engine.index.doc_type_rows.items())
        print(
            f"mcp_server: {engine.index.rows} chunks ({counts}) ready over {args.transport}", file=sys.stderr
        )
    if args.transport == "http":
        print(
            f"mcp_server: http on {args.host}:{args.port}, bearer token "
            f"{'required' if token else 'not required (loopback only)'}",
            file=sys.stderr,
        )
        server.run(
            "streamable-http",
            host=args.host,
            port=args.port,
            max_request_body_size=http_security.MAX_REQUEST_BODY_BYTES,
            transport_security=http_security.transport_security(args.host, args.allowed_host),
        )
    else:
        server.run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
