"""Services a step names: which names read as products, how they are found in a step, and where they go."""

from __future__ import annotations

from a2x_local.compose.naming import NameIndex, product_name, put_first

NAMES = {"slack": "Slack", "slack2": "Slack MCP Server", "drive": "Google Drive", "google": "Google",
         "gitlab": "GitLab", "fetch": "Fetch", "weather": "mcp-weather", "wa": "WhatsApp MCP Server",
         "x": "X", "s3": "AWS S3"}


def test_product_names_drop_generic_words_and_need_a_capital_or_a_digit() -> None:
    assert product_name("WhatsApp MCP Server") == ("WhatsApp",)
    assert product_name("Google Drive") == ("Google", "Drive")
    assert product_name("mcp-weather") is None          # a description, not a product
    assert product_name("MCP Server") is None           # nothing left
    assert product_name("X") is None                    # one letter names too much
    assert product_name("a b c d e") is None and product_name("A B C D E") is None   # too long to be a name
    assert product_name("ffmpeg 7") == ("ffmpeg", "7")


def test_a_step_names_a_service_only_as_written_and_as_whole_words() -> None:
    index = NameIndex(NAMES)
    assert index.named("post it to our Slack channel") == ["slack", "slack2"]   # both servers carry the name
    assert index.named("post it to our slack channel") == []                     # not written as the product
    assert index.named("Slackware install") == []                                # part of a word
    assert index.named("upload it to Google Drive") == ["drive"]                 # the longest name at one place
    assert index.named("search Google for it") == ["google"]
    assert index.named("send it on WhatsApp, then store it in AWS S3") == ["wa", "s3"]


def test_a_plain_capitalised_word_opening_the_step_is_not_a_name() -> None:
    index = NameIndex(NAMES)
    assert index.named("Fetch last quarter's revenue") == []        # any verb opening a sentence looks like this
    assert index.named("open the page with Fetch") == ["fetch"]
    assert index.named("GitLab merge requests") == ["gitlab"]       # a brand's own spelling counts anywhere


def test_names_are_found_beside_chinese_text() -> None:
    assert NameIndex(NAMES).named("然后发到我们的Slack频道") == ["slack", "slack2"]


def test_named_services_go_first_in_retrieval_order() -> None:
    assert put_first(["a", "b", "slack2", "c"], ["slack", "slack2"]) == ["slack2", "slack", "a", "b", "c"]
    assert put_first(["a", "b"], []) == ["a", "b"]
