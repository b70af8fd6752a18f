"""Measure the embedder on real chunks: token lengths, load time, chunks/s per truncation, query latency.

Truncation trades coverage for speed: ESP32 prose tokenises at ~2.3 tokens per word, so a 400-word
chunk is ~900 tokens and MiniLM at 256 sees only its start. This prints both sides of that trade.

    uv run embed_bench.py CHUNKS.jsonl [--sample 200] [--max-tokens 128 256 512] [--queries Q.jsonl]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import embed_and_store
import embedder
from schema import read_jsonl


def read_field(path: Path, field: str) -> list[str]:
    """One string field of every JSONL row (chunk ``text``, eval ``query``)."""
    values = []
    for number, row in enumerate(read_jsonl(path), 1):
        if not isinstance(row, dict) or field not in row:
            raise ValueError(f"{path} row {number}: not a JSON object with a {field!r} field")
        values.append(str(row[field]))
    if not values:
        raise ValueError(f"{path} holds no rows")
    return values


def percentiles(values: list[int]) -> str:
    cuts = np.percentile(values, [10, 50, 90, 99])
    return "p10 {:.0f} / p50 {:.0f} / p90 {:.0f} / p99 {:.0f} / max {}".format(*cuts, max(values))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chunks", type=Path, help="chunk JSONL (schema.py rows)")
    parser.add_argument(
        "--sample",
        type=int,
        default=200,
        help="chunks to embed per truncation length (0: token lengths only)",
    )
    parser.add_argument("--max-tokens", type=int, nargs="+", default=[128, 256, 512])
    parser.add_argument("--queries", type=Path, help="eval JSONL with a query field, for query latency")
    parser.add_argument("--threads", type=int, help="onnxruntime intra-op threads (default: available cores)")
    args = parser.parse_args(argv)
    try:
        texts = read_field(args.chunks, "text")
        queries = read_field(args.queries, "query") if args.queries else []
        if args.sample < 0:
            raise ValueError(f"--sample must be 0 (token lengths only) or more, got {args.sample}")
        for limit in args.max_tokens:
            embedder.check_max_tokens(limit, embedder.MINILM_POSITION_LIMIT)
    except (OSError, ValueError) as error:
        print(f"embed_bench: {error}", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory() as empty_cache:
        started = time.perf_counter()
        embedder.OnnxMiniLM(cache_dir=Path(empty_cache), threads=args.threads)
        cold = time.perf_counter() - started
    started = time.perf_counter()
    model = embedder.OnnxMiniLM(threads=args.threads)
    warm = time.perf_counter() - started
    print(f"load: {cold:.2f} s building the ONNX graph, {warm:.2f} s from the cached graph")

    counts = model.count_tokens(texts)
    words = [len(text.split()) for text in texts]
    print(f"{len(texts)} chunks: tokens {percentiles(counts)}; words {percentiles(words)}")
    print(
        f"tokens per word {sum(counts) / max(1, sum(words)):.2f}; "
        + ", ".join(
            f"> {limit} tokens: {sum(c > limit for c in counts) / len(counts):.0%}"
            for limit in (128, 256, 512)
        )
    )

    # What a build embeds for these rows (leads, windows; texts shared by rows once), at the store's
    # 256-token truncation: the figure to compare when a change alters the cost of building a store.
    stored = {t for row in read_jsonl(args.chunks) for t in embed_and_store.embedding_texts(row)}
    work = sum(min(c, embedder.MINILM_MAX_TOKENS) for c in model.count_tokens(sorted(stored)))
    print(f"store embedding work: {len(stored)} texts, {work} tokens at {embedder.MINILM_MAX_TOKENS}")

    sample = random.Random(0).sample(texts, min(args.sample, len(texts)))
    sample_counts = model.count_tokens(sample)
    for limit in args.max_tokens if sample else ():
        truncated = embedder.OnnxMiniLM(max_tokens=limit, threads=args.threads)
        truncated.embed_documents(sample[:8])  # warm-up: first run allocates
        started = time.perf_counter()
        truncated.embed_documents(sample)
        elapsed = time.perf_counter() - started
        seen = sum(min(c, limit) for c in sample_counts)
        print(
            f"max_tokens {limit}: {len(sample) / elapsed:.1f} chunks/s ({elapsed:.1f} s for {len(sample)}), "
            f"{seen / elapsed:.0f} tokens/s, covers {seen / sum(sample_counts):.0%} of the sample's tokens"
        )

    if queries:
        model.embed_query(queries[0])
        latencies = []
        for query in queries:
            started = time.perf_counter()
            model.embed_query(query)
            latencies.append((time.perf_counter() - started) * 1000)
        cuts = np.percentile(latencies, [50, 95])
        print(f"query latency over {len(queries)} queries: p50 {cuts[0]:.1f} ms, p95 {cuts[1]:.1f} ms")
    median = statistics.median(counts)
    print(f"embed_bench: {len(texts)} chunks, sample {len(sample)}, median {median:.0f} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
