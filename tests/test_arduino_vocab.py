"""Mining the Arduino vocabulary: which ESP-IDF functions each Arduino-ESP32 name reaches, read from a
small arduino-esp32 tree and ESP-IDF headers written for the tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import mine_arduino_vocab

FIXTURES = Path(__file__).parent / "fixtures" / "arduino"


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("vocab") / "arduino_vocab.json"
    status = mine_arduino_vocab.main(
        [str(FIXTURES / "core"), "--idf-path", str(FIXTURES / "idf"), "--out", str(out)]
    )
    assert status == 0
    return json.loads(out.read_text())


def test_mining_follows_aliases_helpers_and_methods_to_the_idf_calls(mined: dict) -> None:
    functions = mined["functions"]
    assert functions["analogRead"] == ["adc_oneshot_read"]  # weak alias of the implementation
    assert functions["uartSetBaudRate"] == ["uart_set_baudrate"]  # the lock's xSemaphoreTake is plumbing
    assert functions["HardwareSerial::updateBaudRate"] == ["uart_set_baudrate"]  # through the helper
    assert functions["WiFiGenericClass::mode"] == ["esp_wifi_set_mode"]
    assert "HardwareSerial::available" not in functions  # it reaches no ESP-IDF call
    assert mined["instances"] == {"Serial": "HardwareSerial", "WiFi": "WiFiClass"}
    assert mined["classes"]["WiFiClass"][0] == "WiFiGenericClass"
    assert "messages" not in mined and "Setting UART" not in json.dumps(mined), "names only, no upstream text"
    assert mined["format"] == mine_arduino_vocab.VOCAB_FORMAT and mined["arduino_files"] == 6


def test_mining_several_releases_of_the_core_keeps_each_ones_calls_newest_first(tmp_path: Path) -> None:
    out = tmp_path / "arduino_vocab.json"
    trees = [str(FIXTURES / "core"), str(FIXTURES / "core-old")]
    assert mine_arduino_vocab.main([*trees, "--idf-path", str(FIXTURES / "idf"), "--out", str(out)]) == 0
    mined = json.loads(out.read_text())
    assert mined["functions"]["analogRead"] == ["adc_oneshot_read", "adc1_get_raw"]
    assert mined["arduino_files"] == 7 and len(mined["arduino_trees"]) == 2


def test_mining_refuses_a_folder_that_is_no_arduino_tree(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        mine_arduino_vocab.main([str(tmp_path), "--idf-path", str(FIXTURES / "idf")])


def test_the_committed_vocabulary_maps_the_cores_common_calls() -> None:
    functions = json.loads((Path(__file__).parent.parent / "arduino_vocab.json").read_text())["functions"]
    assert any(call.startswith("adc") for call in functions["analogRead"])
    assert any(call.startswith("gpio") for call in functions["pinMode"])
    assert any(call.startswith("esp_wifi") for call in functions["WiFiGenericClass::mode"])
