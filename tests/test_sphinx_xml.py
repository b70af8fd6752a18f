"""sphinx_xml.py: docutils XML pages become Section/Block trees with nothing dropped or split wrongly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chunking import Block, Section, chunk_tree
from sphinx_xml import Page, PageError, iter_pages, load_page, page_tree, section_anchors

FIXTURES = Path(__file__).parent / "fixtures" / "idf"
C3 = FIXTURES / "esp32c3"
HEADER = '<?xml version="1.0" encoding="utf-8"?>\n'


def _page(chip: str, rel: str) -> Page:
    page = load_page(FIXTURES / chip / rel, FIXTURES / chip)
    assert page is not None
    return page


def _blocks(section: Section) -> list[Block]:
    return [*section.blocks, *(b for child in section.children for b in _blocks(child))]


def _block_with(section: Section, needle: str) -> Block:
    found = [b for b in _blocks(section) if needle in b.text]
    assert len(found) == 1, f"{needle!r} is in {len(found)} blocks"
    return found[0]


def _write(tmp_path: Path, rel: str, body: str) -> Page:
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + body, encoding="utf-8")
    page = load_page(path, tmp_path)
    assert page is not None
    return page


def test_sphinx_pages_are_documents_and_doxygen_xml_is_ignored() -> None:
    found = {path.relative_to(C3).as_posix(): loaded for path, loaded in iter_pages(C3)}
    assert found["gpio_8h.xml"] is None
    pages = {rel: p for rel, p in found.items() if isinstance(p, Page)}
    assert set(pages) == {
        "api-guides/bootloader.xml",
        "api-reference/kconfig-reference.xml",
        "api-reference/peripherals/gpio.xml",
    }
    gpio = pages["api-reference/peripherals/gpio.xml"]
    assert gpio.doc_path == "api-reference/peripherals/gpio"  # from source=, after docs/en/, no .rst
    assert gpio.title == "GPIO & RTC GPIO"


def test_nested_sections_become_the_tree() -> None:
    tree = page_tree(_page("esp32c3", "api-reference/peripherals/gpio.xml"))
    assert tree.title == "GPIO & RTC GPIO"
    assert [c.title for c in tree.children] == ["GPIO Summary", "Usage", "API Reference - Normal GPIO"]
    assert [c.title for c in tree.children[1].children] == ["Configuring a Pin"]
    paths = {" > ".join(c.section_path) for c in chunk_tree(tree, max_words=60, min_words=10)}
    assert "GPIO & RTC GPIO > Usage > Configuring a Pin" in paths


def test_api_desc_is_one_atomic_block_with_signature_parameters_and_returns() -> None:
    tree = page_tree(_page("esp32c3", "api-reference/peripherals/gpio.xml"))
    block = _block_with(tree, "esp_err_t gpio_set_level(")
    assert block.atomic
    lines = block.text.splitlines()
    assert lines[0] == "esp_err_t gpio_set_level(gpio_num_t gpio_num, uint32_t level)"
    for needed in (
        "GPIO set output level.",
        "Note: This function is allowed to be executed when Cache is disabled",
        "Parameters:",
        "- gpio_num -- GPIO number. If you want to set the output level of e.g. GPIO16",
        "- level -- Output level. 0: low ; 1: high",
        "Returns:",
        "- ESP_ERR_INVALID_ARG GPIO number error",
    ):
        assert needed in block.text
    assert block.symbol_refs[0] == "gpio_set_level"
    assert "esp_err_t" in block.symbol_refs
    # an entry far over the budget still reaches one chunk whole
    chunks = [c for c in chunk_tree(tree, max_words=20, min_words=5) if "t gpio_set_level(" in c.text]
    assert len(chunks) == 1 and "- level -- Output level" in chunks[0].text


def test_single_parameter_field_and_other_entries_render_as_declarations() -> None:
    tree = page_tree(_page("esp32c3", "api-reference/peripherals/gpio.xml"))
    assert "Parameters: gpio_num -- GPIO number." in _block_with(tree, "int gpio_get_level(").text
    assert _block_with(tree, "GPIO_IS_VALID_GPIO(gpio_num)").text.startswith("GPIO_IS_VALID_GPIO(gpio_num)")
    enum = _block_with(tree, "enum gpio_mode_t")
    assert "enumerator GPIO_MODE_OUTPUT" in enum.text and "GPIO_MODE_OUTPUT" in enum.symbol_refs


def test_struct_carries_its_typedef_name_and_qualified_members() -> None:
    tree = page_tree(_page("esp32c3", "api-reference/peripherals/gpio.xml"))
    struct = _block_with(tree, "struct gpio_config_s\n")
    assert struct.atomic
    assert "typedef struct gpio_config_s gpio_config_t" in struct.text
    assert "uint64_t pin_bit_mask" in struct.text and "gpio_mode_t mode" in struct.text
    assert {"gpio_config_s", "gpio_config_t", "gpio_config_s::pin_bit_mask", "gpio_config_s::mode"} <= set(
        struct.symbol_refs
    )


def test_oversized_struct_is_cut_between_members_and_every_piece_names_it() -> None:
    tree = page_tree(_page("esp32c3", "api-reference/peripherals/gpio.xml"), max_words=25)
    pieces = [b for b in _blocks(tree) if b.text.startswith("struct gpio_config_s")]
    assert len(pieces) > 1 and all(p.atomic for p in pieces)
    assert pieces[1].text.startswith("struct gpio_config_s (typedef gpio_config_t) (continued)")
    joined = "\n".join(p.text for p in pieces)
    for member in ("uint64_t pin_bit_mask", "GPIO pin: set with bit mask", "gpio_mode_t mode"):
        assert joined.count(member) == 1
    assert all("gpio_config_t" in p.symbol_refs for p in pieces)


def test_inline_nodes_stay_inside_their_paragraph() -> None:
    tree = page_tree(_page("esp32c3", "api-reference/peripherals/gpio.xml"))
    block = _block_with(tree, "pin_bit_mask selects the pins")
    assert block.text.startswith("Fill a gpio_config_t and pass it to gpio_config(). The field pin_bit_mask")
    assert (
        "enable CONFIG_GPIO_CTRL_FUNC_IN_IRAM. The example peripherals/gpio/generic_gpio shows" in block.text
    )
    assert not any(b.text.strip() == "pin_bit_mask" for b in _blocks(tree))
    assert {"gpio_config_t", "gpio_config", "CONFIG_GPIO_CTRL_FUNC_IN_IRAM"} <= set(block.symbol_refs)
    # page#anchor: the ingest turns the anchor into the section that holds it
    assert block.doc_refs == ["api-reference/kconfig-reference#config-gpio-ctrl-func-in-iram"]
    assert block.file_refs == ["examples/peripherals/gpio/generic_gpio"]


def test_table_is_rendered_row_by_row_with_cells_separated() -> None:
    tree = page_tree(_page("esp32c3", "api-reference/peripherals/gpio.xml"))
    table = _block_with(tree, "Pin capabilities").text.splitlines()
    assert table == [
        "Pin capabilities",
        "GPIO | Analog Function | Comments",
        "GPIO0 | ADC1_CH0 | RTC",
        "GPIO2 | ADC1_CH2 | Strapping pin; RTC",
        "GPIO9 |  | Strapping pin",
    ]


def test_long_table_is_cut_between_rows_and_each_piece_repeats_the_header(tmp_path: Path) -> None:
    rows = "".join(
        f"<row><entry><paragraph>SIG{i}</paragraph></entry>"
        f"<entry><paragraph>signal number {i} routed through the matrix</paragraph></entry></row>"
        for i in range(40)
    )
    page = _write(
        tmp_path,
        "signals.xml",
        '<document source="/esp-idf/docs/en/signals.rst"><section ids="s"><title>Signals</title>'
        "<table><tgroup cols='2'><thead><row><entry><paragraph>Name</paragraph></entry>"
        f"<entry><paragraph>Meaning</paragraph></entry></row></thead><tbody>{rows}</tbody></tgroup></table>"
        "</section></document>",
    )
    pieces = page_tree(page, max_words=60).blocks
    assert len(pieces) > 3
    assert all(p.text.splitlines()[0] == "Name | Meaning" for p in pieces)
    body = [line for p in pieces for line in p.text.splitlines()[1:]]
    assert body == [f"SIG{i} | signal number {i} routed through the matrix" for i in range(40)]


def test_lists_admonitions_and_literal_blocks_keep_their_shape() -> None:
    tree = page_tree(_page("esp32c3", "api-reference/peripherals/gpio.xml"))
    nested = _block_with(tree, "Inputs can enable internal pull resistors").text
    assert (
        "- Inputs can enable internal pull resistors:\n  1. pull-up with GPIO_PULLUP_ENABLE\n  2. pull-down"
        in (nested)
    )
    code = _block_with(tree, "Driving a pin high").text
    assert "```c\ngpio_config_t io_conf = {\n    .pin_bit_mask = 1ULL << GPIO_NUM_2," in code
    note = _block_with(tree, "Strapping pins are sampled at reset").text
    assert note.startswith("Note: Strapping pins are sampled at reset; see Bootloader for")
    assert _block_with(tree, "Strapping pins are sampled").doc_refs == ["api-guides/bootloader#"]
    header = _block_with(tree, "REQUIRES esp_driver_gpio")
    assert header.file_refs == ["components/esp_driver_gpio/include/driver/gpio.h"]
    assert not any("never reaches a chunk" in b.text for b in _blocks(tree))  # comments are metadata


def test_only_resolved_text_is_each_chips_own() -> None:
    c3 = "\n".join(b.text for b in _blocks(page_tree(_page("esp32c3", "api-reference/peripherals/gpio.xml"))))
    esp32 = "\n".join(
        b.text for b in _blocks(page_tree(_page("esp32", "api-reference/peripherals/gpio.xml")))
    )
    assert "The ESP32-C3 chip features 22 physical GPIO pins" in c3 and "34 physical" not in c3
    assert "The ESP32 chip features 34 physical GPIO pins" in esp32
    assert "dual-core chip" in esp32 and "dual-core" not in c3


def test_kconfig_option_keeps_name_description_and_default_in_one_chunk() -> None:
    tree = page_tree(_page("esp32c3", "api-reference/kconfig-reference.xml"))
    option = _block_with(tree, "UART console baud rate")
    assert option.atomic and option.symbol_refs[0] == "CONFIG_ESP_CONSOLE_UART_BAUDRATE"
    assert re.search(r"Default value:\n\s+- 115200", option.text)
    assert "Range:\n  - from 1200 to 4000000 if CONFIG_PM_ENABLE is disabled" in option.text
    for chunk in chunk_tree(tree, max_words=30, min_words=5):
        if "UART console baud rate" in chunk.text:
            assert "CONFIG_ESP_CONSOLE_UART_BAUDRATE" in chunk.text and "115200" in chunk.text
            assert "CONFIG_ESP_CONSOLE_UART_BAUDRATE" in chunk.symbol_refs
    # a menuconfig option keeps its own text; its sub-option is its own entry
    parent = _block_with(tree, "Provide basic I/O functions")
    assert "select function" not in parent.text and parent.symbol_refs[0] == "CONFIG_VFS_SUPPORT_IO"
    assert _block_with(tree, "Provide select function").symbol_refs[0] == "CONFIG_VFS_SUPPORT_SELECT"


def test_page_with_text_before_its_sections_is_titled_like_sphinx(tmp_path: Path) -> None:
    page = _write(
        tmp_path,
        "get-started/install.xml",
        '<document source="/esp-idf/docs/en/get-started/install.rst">'
        "<paragraph>Activate the environment first.</paragraph>"
        "<section ids='a'><title>Linux</title><paragraph>Run export.sh.</paragraph></section>"
        "<section ids='b'><title>Windows</title><paragraph>Run export.ps1.</paragraph></section>"
        "</document>",
    )
    tree = page_tree(page)
    # Sphinx titles the page by its first section; that section's text is not nested under itself
    assert page.title == "Linux" and tree.title == "Linux"
    assert [b.text for b in tree.blocks] == ["Activate the environment first.", "Run export.sh."]
    assert [c.title for c in tree.children] == ["Windows"]


def test_include_fragment_without_sections_is_titled_by_its_file_name(tmp_path: Path) -> None:
    page = _write(
        tmp_path,
        "get-started/activate-env.xml",
        '<document source="/esp-idf/docs/en/get-started/activate-env.rst">'
        "<paragraph>Open a terminal and activate ESP-IDF.</paragraph></document>",
    )
    tree = page_tree(page)
    assert page.title == "activate-env" and page.doc_path == "get-started/activate-env"
    assert [b.text for b in tree.blocks] == ["Open a terminal and activate ESP-IDF."]


def test_malformed_page_raises_an_error_naming_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.xml"
    broken.write_text(HEADER + '<document source="/esp-idf/docs/en/broken.rst"><section>', encoding="utf-8")
    with pytest.raises(PageError, match=r"broken\.xml"):
        load_page(broken, tmp_path)


def test_option_list_keeps_each_option_with_its_argument(tmp_path: Path) -> None:
    options = "".join(
        f"<option_list_item><option_group><option><option_string>{flag}</option_string>"
        f'<option_argument delimiter="{gap}">{arg}</option_argument></option></option_group>'
        f"<description><paragraph>{meaning}</paragraph></description></option_list_item>"
        for flag, gap, arg, meaning in (("--port", " ", "PORT", "Serial port."), ("-9", "", "dBm", "Power."))
    )
    page = _write(
        tmp_path,
        "tool.xml",
        '<document source="/esp-idf/docs/en/tool.rst"><section ids="t"><title>Tool</title>'
        f"<option_list>{options}</option_list></section></document>",
    )
    assert page_tree(page).blocks[0].text.splitlines() == ["--port PORT  Serial port.", "-9dBm  Power."]


def test_section_anchors_follow_the_row_section_paths() -> None:
    anchors = section_anchors(_page("esp32c3", "api-reference/peripherals/gpio.xml"))
    assert anchors["gpio-rtc-gpio"] == "GPIO & RTC GPIO"  # the single top section is the page root
    assert anchors["configuring-a-pin"] == "GPIO & RTC GPIO > Usage > Configuring a Pin"
    # an API declaration's id lands on the section that lists it
    assert anchors["_CPPv413gpio_config_t"] == "GPIO & RTC GPIO > API Reference - Normal GPIO > Structures"
