"""chunking.py: subtrees kept whole, oversized ones split, atomic blocks intact, small ones merged."""

from chunking import Block, Section, chunk_tree, word_count


def words(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def test_fitting_tree_is_one_chunk_with_path_prefix_and_subheadings() -> None:
    root = Section(
        "UART",
        [Block("Intro text.", symbol_refs=["UART_CONF0_REG"])],
        [Section("Baud rate", [Block("Set the divider.")]), Section("FIFO", [Block("128 bytes.")])],
    )
    chunks = chunk_tree(root, max_words=400)
    assert len(chunks) == 1
    text = chunks[0].text
    assert text.startswith("UART\n\n")
    assert "# Baud rate" in text and "# FIFO" in text
    assert text.index("Set the divider.") < text.index("128 bytes.")
    assert chunks[0].symbol_refs == ["UART_CONF0_REG"]
    assert chunks[0].section_path == ["UART"]


def test_oversized_tree_splits_by_subsection_and_prefixes_each_path() -> None:
    root = Section(
        "GPIO",
        [Block(words(50, "intro"))],
        [Section("Matrix", [Block(words(300, "m"))]), Section("IO MUX", [Block(words(300, "x"))])],
    )
    chunks = chunk_tree(root, max_words=400, min_words=80)
    paths = [c.section_path for c in chunks]
    # the 50-word intro is under min_words, so it travels with the next section under its heading
    assert paths == [["GPIO"], ["GPIO", "IO MUX"]]
    assert "# Matrix" in chunks[0].text and chunks[0].text.index("intro0") < chunks[0].text.index("m0")
    io_mux = next(c for c in chunks if c.section_path == ["GPIO", "IO MUX"])
    assert io_mux.text.startswith("GPIO > IO MUX\n\n")
    assert all(c.words <= 420 for c in chunks)
    # nothing lost: every input word appears in some chunk
    every = " ".join(c.text for c in chunks)
    for token in ("intro49", "m299", "x0", "x299"):
        assert token in every.split()


def test_atomic_block_is_never_split_even_when_oversized() -> None:
    register = "Register BIG_REG\nAddress: 0x0010\n" + "\n".join(
        f"- F{i} [{i}] (R/W) reset 0x0" for i in range(300)
    )
    root = Section("Regs", [Block(words(100)), Block(register, atomic=True, symbol_refs=["BIG_REG"])])
    chunks = chunk_tree(root, max_words=400)
    holding = [c for c in chunks if "Register BIG_REG" in c.text]
    assert len(holding) == 1
    assert "F0 [0]" in holding[0].text and "F299 [299]" in holding[0].text
    assert "BIG_REG" in holding[0].symbol_refs


def test_oversized_plain_block_is_cut_at_sentences_within_budget() -> None:
    long_paragraph = " ".join(f"Sentence {i} has several words in it." for i in range(200))
    chunks = chunk_tree(Section("Doc", [Block(long_paragraph)]), max_words=400)
    assert len(chunks) > 1
    assert all(c.words <= 410 for c in chunks)
    assert "Sentence 199 has" in chunks[-1].text


def test_small_neighbours_merge_but_large_sections_stay_apart() -> None:
    root = Section(
        "Doc",
        [Block(words(500, "big"))],
        [Section("A", [Block("tiny a")]), Section("B", [Block("tiny b")])],
    )
    chunks = chunk_tree(root, max_words=400, min_words=80)
    tiny = [c for c in chunks if "tiny a" in c.text]
    assert len(tiny) == 1 and "tiny b" in tiny[0].text
    assert "# A" in tiny[0].text and "# B" in tiny[0].text
    assert word_count(tiny[0].text) < 400


def test_standalone_blocks_are_chunks_of_their_own_and_take_no_neighbours() -> None:
    registers = [
        Block(f"Register R{i}_REG\nAddress: 0x{i:04X}", atomic=True, standalone=True) for i in range(3)
    ]
    root = Section(
        "I2C",
        [Block("Overview of the controller.")],
        [Section("Registers", [Block("Addresses are offsets."), *registers, Block("Closing remark.")])],
    )
    chunks = chunk_tree(root, max_words=400, min_words=80)
    holding = [[c for c in chunks if f"Register R{i}_REG" in c.text] for i in range(3)]
    assert all(len(h) == 1 for h in holding)
    for i, (chunk,) in enumerate(holding):
        assert chunk.section_path == ["I2C", "Registers"]
        assert chunk.text == f"I2C > Registers\n\nRegister R{i}_REG\nAddress: 0x{i:04X}"
    every = "\n".join(c.text for c in chunks)
    assert "Overview of the controller." in every and "Closing remark." in every
