import pytest

pytestmark = pytest.mark.lab8_1


def test_lines_are_numbered_and_details_describe_the_file():
    assert True
