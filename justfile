# esp32-docs-mcp: every documented command. `just` lists them; each line says what healthy looks like.
# Corpus locations come from the environment: TRM_PATH (TRM LaTeX), IDF_PATH (ESP-IDF checkout; IDF_PATHS
# for several, one per release), IDF_XML_PATH (built Sphinx XML, one folder per chip), ESP32_DOCS_DB
# (store; default ./esp_docs.lancedb). sources.yaml pins the commits `just rebuild` builds from.

set positional-arguments

db := env_var_or_default("ESP32_DOCS_DB", "esp_docs.lancedb")
gold := env_var_or_default("EVAL_QUERIES", "../shared/eval/dev_queries.jsonl")

_default:
    @just --list --unsorted

# Run the test suite; healthy: "N passed" and only corpus tests skipped when no corpus is set.
test *args:
    uv run pytest {{args}}

# Lint and format check; healthy: "All checks passed!" and no file would be reformatted.
lint:
    uv run ruff check .
    uv run ruff format --check .

# The modules' import graph by layer; healthy: the last line ends "0 problems" (no upward edge).
imports:
    uv run import_graph.py

# Serve the MCP server over stdio on the store; healthy: one "ready" line on stderr, then it waits for a client.
serve:
    uv run mcp_server.py --db {{db}}

# Compacted store + manifest into one verified bundle (--out FILE; --to s3://bucket/prefix/esp_docs.lancedb publishes instead); healthy: "bundle: FILE written, N MiB", exit 0.
pack *args:
    uv run bundle.py pack --db {{db}} "$@"

# Verify a bundle (checksums, embedder, validate_store) and install it atomically (--db DIR); healthy: "verified and installed", exit 0; a refused bundle names the failed check, exit 2.
install bundle *args:
    uv run bundle.py install --db {{db}} "$@"

# Serve the bundled demo sample; the first start embeds its 234 chunks as 795 texts (about 20 s, progress on stderr), later starts reuse it; healthy: then it waits for a client on stdio.
demo:
    uv run mcp_server.py --demo

# Fetch or verify the pinned sources (sources.yaml; offline: TRM_PATH, IDF_PATH/IDF_PATHS, --offline); healthy: one line per tree, "N trees verified", exit 0.
sources *args:
    uv run sources.py "$@"

# Whole store from the pinned sources, skipping what is up to date (--dry-run: the plan); healthy: a closing table with no failed/blocked stage, exit 0.
rebuild *args:
    uv run rebuild.py "$@"

# Parse the TRM LaTeX ($TRM_PATH) into trm_chunks.jsonl; healthy: "387 chapters … ~11,200 chunks … 0 failures", exit 0.
ingest-trm:
    uv run ingest_trm.py --out-path trm_chunks.jsonl

# Count registers in the LaTeX without the parser; healthy: ~14,200 registers, 0 unresolved, 13 case-fixed includes.
census:
    uv run register_census.py source

# Every source register reached a chunk whole, chapters keep their words; healthy: 0 missing/split, no chapter < 80%.
check-trm: ingest-trm-if-missing
    uv run register_census.py check trm_chunks.jsonl
    uv run trm_verify.py words trm_chunks.jsonl

# Every math span rendered and checked by evaluation against its LaTeX (sympy); healthy: "mismatch: 0", exit 0.
check-formulas:
    uv run formula_census.py --show 20

# Per-register text capture and raw-macro report; healthy: no register under 50%, only a stray `\mu` raw.
verify-trm-detail: ingest-trm-if-missing
    uv run trm_verify.py registers trm_chunks.jsonl
    uv run trm_verify.py macros trm_chunks.jsonl

[private]
ingest-trm-if-missing:
    @test -f trm_chunks.jsonl || just ingest-trm

# Build ESP-IDF docs ($IDF_PATH) to XML for the given chips; healthy: "N pages written" with N >= 250 per chip.
build-docs *chips:
    ./build_idf_docs.sh "$@"

# Ingest one chip's XML build into chunks_<chip>.jsonl (extra args: --idf-path or --source-commit); healthy: 0 placeholders, API census complete.
ingest-idf chip xml_dir *args:
    uv run ingest_sphinx_xml.py {{xml_dir}} --chip {{chip}} --out-path chunks_{{chip}}.jsonl {{args}}

# Collapse per-chip chunks into idf_chunks.jsonl; healthy: ~3/4 of chunks collapse.
dedup:
    uv run dedup_chunks.py chunks_*.jsonl --out-path idf_chunks.jsonl

# Ingest SoC headers from $IDF_PATH into src_chunks.jsonl; healthy: ~12,600 chunks (811 register cards), exit 0.
ingest-src:
    uv run ingest_source.py --idf-path {{env_var('IDF_PATH')}} --out-path src_chunks.jsonl

# Share of TRM register names with a #define in the same chip's headers; healthy: ~75-80% overall.
check-src-registers:
    uv run ingest_source.py check-registers --trm-chunks trm_chunks.jsonl --src-chunks src_chunks.jsonl --min-share 0.7

# Every declared header symbol reached a chunk; healthy: 100%, exit 0.
check-src-census:
    uv run ingest_source.py census --idf-path {{env_var('IDF_PATH')}} --src-chunks src_chunks.jsonl

# Embed one corpus into the store (replaces that doc_type only); healthy: one summary line, exit 0.
embed doc_type chunks source_repo:
    uv run embed_and_store.py {{chunks}} --doc-type {{doc_type}} --source-repo {{source_repo}} --db {{db}}

# Embed all three corpora ($TRM_PATH, $IDF_PATH); healthy: three summary lines; a re-run embeds 0.
store:
    uv run embed_and_store.py trm_chunks.jsonl --doc-type trm --source-repo {{env_var('TRM_PATH')}} --db {{db}}
    uv run embed_and_store.py idf_chunks.jsonl --doc-type idf --source-repo {{env_var('IDF_PATH')}} --db {{db}}
    uv run embed_and_store.py src_chunks.jsonl --doc-type src --source-repo {{env_var('IDF_PATH')}} --db {{db}}

# Every header register answers at its address; healthy: ~99.5% overall, each failure an upstream hole with its cause.
check-register-addresses:
    uv run register_facts.py addresses --db {{db}} --min-share 0.9

# Register census (headers with fields + reset, manual vs headers); healthy: ~97.1% of header registers, report written.
register-census:
    uv run register_facts.py census --db {{db}} --report register_census.md

# Validate the store; healthy: rows per doc_type/chip, round trip >= 95% at rank 1, exit 0.
validate:
    uv run validate_store.py --db {{db}}

# Score retrieval on the dev queries; healthy: hit@5 and MRR@10 per category, no errors.
eval mode="all":
    uv run eval_retrieval.py {{gold}} --db {{db}} --mode {{mode}}

# Train the reranker on a built store (eval/pool_*.jsonl + the shared dev questions): cross-validated hit@k and MRR@10 with 95% intervals per set and category, then ranker_model.json; healthy: "trained on N questions ... model written".
train-ranker *args:
    uv run train_ranker.py --db {{db}} "$@"

# Re-mine arduino_vocab.json (which ESP-IDF calls each Arduino-ESP32 function makes) from arduino-esp32 trees, newest first, and the ESP-IDF trees given with --idf-path; healthy: "N Arduino names mapped to ESP-IDF calls", exit 0.
mine-arduino-vocab *args:
    uv run mine_arduino_vocab.py "$@"

# The training pools through the real server (figures of questions the model was trained on: a check of the serving path, not of generalisation).
eval-pool:
    uv run eval_retrieval.py eval/pool_short.jsonl --db {{db}} --via-mcp
    uv run eval_retrieval.py eval/pool_real.jsonl --db {{db}} --via-mcp

# The frozen test sets, through the real server: run only when a change is finished, never to choose anything.
eval-test:
    uv run eval_retrieval.py eval/test_short.jsonl --db {{db}} --via-mcp
    uv run eval_retrieval.py eval/test_real.jsonl --db {{db}} --via-mcp

# Release-scope check (eval/release_scope_check.jsonl, needs a store holding master and v5.5 of esp32/esp32c3), scored with and without idf_version; healthy: hit@5 near 1 with it, wrong release first 0.
eval-releases:
    uv run eval_retrieval.py eval/release_scope_check.jsonl --db {{db}} --via-mcp

# Error analysis: for each case not answered first, its rank per retriever and its failure class; healthy: few lines.
explain queries=gold:
    uv run eval_retrieval.py {{queries}} --db {{db}} --explain

# hit@k with explicit chip vs project scope vs none (PROJECTS: one ESP-IDF project per chip); healthy: scoped = explicit.
eval-scope projects:
    uv run eval_scope.py {{gold}} --projects {{projects}} --db {{db}}

# Latency p50/p95 over MCP stdio, cold start, server RSS, then embed chunks/s; healthy: warm p50 in tens of ms.
bench chunks="trm_chunks.jsonl":
    uv run bench.py --db {{db}}
    uv run embed_bench.py {{chunks}} --sample 200 --max-tokens 256

# Embedding speed per truncation length on real chunks; healthy: ~10 chunks/s at 256 tokens on 2 cores.
bench-embed chunks="trm_chunks.jsonl":
    uv run embed_bench.py {{chunks}}

# Header ingest CPU against another checkout (git worktree add /tmp/base main) on one ESP-IDF tree; healthy: "JSONL byte-identical".
bench-ingest baseline idf_path:
    uv run ingest_bench.py --baseline {{baseline}} --idf-path {{idf_path}}

# Add one pinned ESP-IDF release to the store (default chip: the project's; --chips esp32,esp32s3; rebuild options pass through, e.g. --offline --idf-path TREE --xml DIR); healthy: its growth lines and "add-release: NAME added".
add-release tag *args:
    uv run add_release.py "$@"

# What changed between releases (eval/test_release_changes.jsonl: legacy vs new drivers, driver/ headers, Kconfig renames, defaults), written from the migration guides before any ranking change; needs a store holding v4.4-v6.0; healthy: the right release's passage first with idf_version.
eval-release-changes:
    uv run eval_retrieval.py eval/test_release_changes.jsonl --db {{db}} --via-mcp
