#!/usr/bin/env python3
"""Renders conversations with transformers' apply_chat_template(...,
tokenize=False), the judge of hpu-train's ChatTemplate (interop_test.cc).

    python render_chat_templates.py JOB.json OUT.json

JOB: {"dirs": [tokenizer directories], "conversations": {name: messages}}.
OUT: {dir: {name: {"false" | "true": result}}} by add_generation_prompt,
each result {"text": ...}, {"refused": the template's raise_exception
message} or {"error": "<type>: <message>"} for any other failure. Run by the
interpreter of .venv/interop, offline.
"""
import json
import sys

from jinja2.exceptions import TemplateError
from transformers import AutoTokenizer


def render(tokenizer, messages, add_generation_prompt):
    try:
        return {"text": tokenizer.apply_chat_template(messages, tokenize=False,
                                                      add_generation_prompt=add_generation_prompt)}
    except TemplateError as e:
        if type(e) is TemplateError:  # raise_exception; its subclasses are Jinja2's own errors
            return {"refused": e.message}
        return {"error": f"{type(e).__name__}: {e}"}
    except Exception as e:  # noqa: BLE001 - reported, the C++ side expects an error too
        return {"error": f"{type(e).__name__}: {e}"}


def main():
    job = json.load(open(sys.argv[1], encoding="utf-8"))
    out = {}
    for directory in job["dirs"]:
        tokenizer = AutoTokenizer.from_pretrained(directory)
        out[directory] = {name: {str(g).lower(): render(tokenizer, messages, g) for g in (False, True)}
                          for name, messages in job["conversations"].items()}
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
