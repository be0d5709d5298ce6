"""Subject stripping: the paper's rule, checked against its package on DreamBench's prompts."""

from __future__ import annotations

import itertools

import pytest

from masc_core.metric.stripping import parse_subject_names, strip_subject

DREAMBENCH_TEMPLATES = [
    "a {} in the jungle",
    "a {} in the snow",
    "a {} on the beach",
    "a {} on a cobblestone street",
    "a {} on top of pink fabric",
    "a {} with a city in the background",
    "a {} floating in an ocean of milk",
    "a red {}",
    "a {} wearing a red hat",
    "a {} in a police outfit",
    "a cube shaped {}",
    "The {} next to THE {}",
    "an {} and another {}",
    "{}",
    "{}s in a row",
    "a {}-shaped cloud",
    "",
]
NAMES = ["dog", "sks dog", "teapot", "stuffed animal", "rc car", "poop emoji", "Dog", "a", "t-rex", "bear plushie"]


@pytest.mark.parametrize("template,name", list(itertools.product(DREAMBENCH_TEMPLATES, NAMES)))
def test_equals_papers_regex_stripper(template, name):
    masc_text = pytest.importorskip("masc.text", reason="masc-metric (the oracle) is installed by .ci/run")
    prompt = template.format(name, name) if template.count("{}") == 2 else template.format(name)
    assert strip_subject(prompt, name) == masc_text.strip_subject_from_prompt(prompt, name)


@pytest.mark.parametrize(
    "prompt,subject,expected",
    [
        ("a photo of a dog on the beach", "dog", "a photo of on the beach"),
        ("A Dog and THE dog", "dog", "and"),  # every article form, any case
        ("dog food for a hotdog", "dog", "food for a hotdog"),  # whole words only; bare form when no article
        ("a sks dog in the snow", "sks dog, dog", "in the snow"),  # several names, longest first
        ("a dog next to a sks dog", ["sks dog", "dog"], "next to"),
        ("a c++ book", "c++", "book"),  # metacharacters are literal...
        ("a c.. book", "c++", "a c.. book"),  # ...and never patterns
        ("the (dog) is here", "(dog)", "is here"),
        ("the dog is   here", "", "the dog is   here"),  # no subject: unchanged
        ("  spaced    out  ", "cat", "spaced out"),  # absent subject: whitespace collapsed
    ],
)
def test_rule(prompt, subject, expected):
    assert strip_subject(prompt, subject) == expected


def test_parse_subject_names():
    assert parse_subject_names(" sks dog ,dog,, DOG ") == ["sks dog", "dog"]
    assert parse_subject_names(None) == []
    assert parse_subject_names(["a", " b "]) == ["a", "b"]
