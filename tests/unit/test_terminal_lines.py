"""What refine tune prints once an adapter is made: where it is, how it did, and the
--generator that uses it."""

from __future__ import annotations

from refine.present.terminal.records import tune_lines


def test_the_tune_lines_say_where_the_adapter_is_and_how_to_use_it():
    summary = {"steps": 4, "final_loss": 0.123456, "held_out_accuracy": 0.625}
    made = {**summary, "out": "ad", "base": "diffusers:tiny/sd", "page": "ad/index.html"}
    assert tune_lines(made) == [
        "adapter: ad (4 steps, final loss 0.1235)",
        "held-out implicit reward accuracy: 0.625",
        "loss curve: ad/index.html",
        'use it: --generator "diffusers:tiny/sd+lora=ad"',
    ]
    sft = {**made, "held_out_accuracy": None, "pushed": "https://hub/me/ad"}
    assert tune_lines(sft)[1:] == [
        "loss curve: ad/index.html",
        'use it: --generator "diffusers:tiny/sd+lora=ad"',
        "pushed to the Hub: https://hub/me/ad",
    ]
