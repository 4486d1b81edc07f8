#!/usr/bin/env python3
"""Writes the chat-template fixtures of tests/instruct: the chat templates of
real models (as their tokenizer_config.json files hold them) and a few
conversations, rendered by Jinja2 exactly as transformers' apply_chat_template
renders them (an ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks
and loop controls; raise_exception; tojson as json.dumps with
ensure_ascii=False). The C++ test (chat_template_test.cc) renders the same
and compares byte for byte.

    python3 tests/instruct/make_chat_fixtures.py

creates build/jinja-venv (python3 -m venv; pip install jinja2) on first use
and reruns itself there. Writes tests/instruct/fixtures/chat_templates.json,
conversations.json and chat_renders.json.
"""
import datetime
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV = os.path.join(ROOT, "build", "jinja-venv")
FIXTURES = os.path.join(HERE, "fixtures")


def ensure_venv():
    python = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not os.path.exists(python):
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
        subprocess.check_call([python, "-m", "pip", "install", "--quiet", "jinja2"])
    os.execv(python, [python, os.path.abspath(__file__)] + sys.argv[1:])


# The chat_template of each model's tokenizer_config.json, with its special tokens.
LLAMA2 = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
)
LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim"
    " + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
MISTRAL = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"
)
ZEPHYR = (
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n"
    "{{ '<|user|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n"
    "{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n"
    "{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"
)
CHATML_QWEN2 = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
GEMMA = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
    "{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"
)
QWEN2_5 = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""
QWEN3 = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}"""
LLAMA3_2 = r"""{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- if strftime_now is defined %}
        {%- set date_string = strftime_now("%d %b %Y") %}
    {%- else %}
        {%- set date_string = "26 Jul 2024" %}
    {%- endif %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
    {%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
"""
# Not a model's: the rest of the subset (comments, whitespace control,
# filters, tests, operators, loop variables, namespace), checked the same way.
ENGINE = r"""{# The engine's subset, beyond what the models' templates use. #}
{%- set ns = namespace(count=0, roles=[]) -%}
{% for message in messages if message.role != 'system' %}
  {%- set ns.count = ns.count + 1 %}
  {%- set ns.roles = ns.roles + [message['role']] %}
  [{{ loop.index }}/{{ loop.length }} rev{{ loop.revindex0 }}{{ ' first' if loop.first }}{{ ' last' if loop.last else '' }}]
  {{- ' prev=' ~ loop.previtem.role if loop.previtem is defined }} {{ message.content | length }} chars
  {%+ if message.content is string and 'x' in message.content %}has x{% elif message.content|length > 40 %}long{% else %}short{% endif %}
{% else %}
no messages
{% endfor %}
count={{ ns.count }} roles={{ ns.roles | join(',') }} upper={{ ns.roles | first | upper }} last={{ ns.roles | last | default('none') }}
{% set users = messages | selectattr('role', 'equalto', 'user') | list -%}
users={{ users | length }} {{ messages[1:] | map(attribute='role') | join('|') }} {{ messages[::-1][0].role if messages else 'empty' }}
{{ {'k': [1, 2.5, none, true, "q\"uote"], 'n': {'x': 'é'}} | tojson }} {{ [1, 'a'] | tojson(indent=2) }}
{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 1 + 2 * 3 - 4 }} {{ 'ab' ~ 3 ~ none }} {{ 'ab' * 2 }}
{{ 'a' in 'cat' }} {{ 'dog' not in ['cat'] }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ not none }} {{ undefined_name is defined }} {{ none is none }}
{{ '  padded\t' | trim }}|{{ 'xxhixx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'Hello World'.lower() }}|{{ 'hello world' | title }}|{{ 'hello'.capitalize() }}
{{ 'abcdef'[1:4] }}{{ 'abcdef'[-2:] }}{{ 'naïve'[2] }}{{ [1, 2, 3, 4][::2] }} {{ range(3) | list }} {{ range(5, 1, -2) | list }}
{%- for k, v in {'a': 1, 'b': 2}.items() %} {{ k }}={{ v }}{% endfor %}
{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 4 %}{% break %}{% endif %}{{ i }}{% endfor %}
{{ [] }} {{ [1, 'two', none] }} {{ {'a': "it's"} }} {{ 1.0 }} {{ 1.5e3 }} {{ true and 'yes' }} {{ false or '' }}{{ messages | length > 0 and 'any' }}
{{- "\n  " -}}   end  {{ bos_token | default('<nobos>') }}{{ eos_token }}
"""

ENGINE_EDGES = r"""{%- set outer = 'kept' %}
{%- for m in messages %}{% set outer = 'loop only' %}{% set seen = m.role %}{% endfor -%}
scope: {{ outer }} {{ seen is defined }}
{#- a comment with lstrip #}
  {#+ kept before this comment #}x
    {%- if true -%}
      trimmed both sides
    {%- endif %}
{% if true +%}
kept newline after +%}
{% endif %}
escapes: {{ '\x41\u00e9\U0001F600\101\t|' }} {{ "it's \"q\"" }} {{ 'a\qb' }}
unicode: {{ 'héllo'|length }} {{ 'héllo'[1:3] }} {{ 'héllo'|upper }} {{ 'ÀB'|lower }} {{ 'héllo'|reverse }}
{%- for c in 'ab' %} c={{ c }}{% endfor %}
{%- for k in {'z': 1, 'a': 2} %} k={{ k }}{% endfor %}
{% for x in [1, 2, 3] %}{{ x }}{{ '<' ~ loop.nextitem ~ '>' if loop.nextitem is defined }}{{ ',' if not loop.last }}{% endfor %}
tests: {{ 9 is divisibleby 3 }} {{ 3 is odd }} {{ 4 is even }} {{ 'a' is in ['a'] }} {{ none is not none }} {{ 1 is number }} {{ true is boolean }} {{ [] is sequence }} {{ {} is mapping }} {{ 'x' is string }} {{ 2 is integer }} {{ 2.0 is float }}
cond: [{{ 'yes' if false }}] [{{ none | default('d') }}] [{{ '' | default('e', true) }}] [{{ missing | default('m') }}]
lists: {{ [1, 2] == [1, 2] }} {{ [1, [2, 'x']] }} {{ [1, 2] + [3] }} {{ ('x') }} {{ (1 + 2) * 3 }} {{ 10 - 2 - 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }}
nums: {{ 7 / 7 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 3 // 2.0 }} {{ -0.0 }} {{ '42' | int + 1 }} {{ 'x' | int }} {{ 2.7 | int }} {{ '1.5' | float }} {{ -3 | abs }}
items: {% for k, v in {'b': [1], 'a': none} | items %}{{ k }}={{ v }};{% endfor %} {{ {'b': 1} | items | list }} {{ {'a': 1}.get('a') }} {{ {'a': 1}.get('z', 'dflt') }} {{ {'a': 1}.keys() | list }}
strings: {{ 'a-b-c'.split('-', 1) }} {{ '  x  '.lstrip() }}|{{ '  x  '.rstrip() }}| {{ 'aXbX'.replace('X', '.') }} {{ 'ab'.startswith('a') }} {{ 'ab'.endswith('b') }} {{ ', '.join(['p', 'q']) }} {{ 'hello world'.title() }} {{ 'x' * 3 }}
join: {{ [1, none, 'a'] | join('/') }} {{ messages | map(attribute='role') | first if messages else '' }} {{ messages | rejectattr('role', 'eq', 'user') | map(attribute='role') | list }} {{ messages | selectattr('content') | list | length }}
{%- for m in messages %}{% if loop.index is even %}{% continue %}{% endif %} {{ loop.index }}{% endfor %}
{% for m in [] %}never{% else %}empty loop else{% endfor %}
{{ messages[-1].role if messages else 'none' }} {{ messages[10] is defined }} {{ (messages | last).content[:5] if messages else '' }}
"""

TEMPLATES = {
    "llama2": {"model": "meta-llama/Llama-2-7b-chat-hf", "template": LLAMA2,
               "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "llama3": {"model": "meta-llama/Meta-Llama-3-8B-Instruct", "template": LLAMA3,
               "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "llama3_2": {"model": "meta-llama/Llama-3.2-1B-Instruct", "template": LLAMA3_2,
                 "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "mistral": {"model": "mistralai/Mistral-7B-Instruct-v0.2", "template": MISTRAL,
                "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "zephyr": {"model": "HuggingFaceH4/zephyr-7b-beta", "template": ZEPHYR,
               "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "</s>"},
    "chatml_qwen2": {"model": "Qwen/Qwen2-7B-Instruct", "template": CHATML_QWEN2,
                     "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "qwen2_5": {"model": "Qwen/Qwen2.5-7B-Instruct", "template": QWEN2_5,
                "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "qwen3": {"model": "Qwen/Qwen3-8B", "template": QWEN3,
              "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "gemma": {"model": "google/gemma-7b-it", "template": GEMMA,
              "bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"},
    "engine": {"model": "", "template": ENGINE, "eos_token": "</s>"},
    "engine_edges": {"model": "", "template": ENGINE_EDGES},
}

CONVERSATIONS = {
    "one_user": [{"role": "user", "content": "Hello, how are you?"}],
    "two_turns": [
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And of Italy?"},
        {"role": "assistant", "content": "Rome, since 1871."},
    ],
    "system": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "Name a prime."},
        {"role": "assistant", "content": "7"},
    ],
    "system_then_user": [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Good morning"},
        {"role": "assistant", "content": "Bonjour"},
        {"role": "user", "content": "Thank you"},
    ],
    "whitespace_unicode": [
        {"role": "user", "content": "  \n leading and trailing spaces, tabs\t and naïve café ☕ 🙂 \n\n"},
        {"role": "assistant", "content": "\nQuotes ' and \", a backslash \\ and {{ braces }} {% tags %}  "},
    ],
    "not_alternating": [
        {"role": "user", "content": "first"},
        {"role": "user", "content": "second"},
    ],
    "only_system": [{"role": "system", "content": "Be brief."}],
    "tool_calls": [
        {"role": "user", "content": "Weather in Paris for 3 days?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {
                "city": "Paris", "days": 3, "units": None, "extra": {"list": [1, 2.5, True], "text": "é\n\"x\""}}}}]},
        {"role": "tool", "content": "{\"temp\": 21}"},
        {"role": "tool", "content": "sunny"},
        {"role": "assistant", "content": "21 °C and sunny."},
    ],
    "thinking": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\n4"},
        {"role": "user", "content": "3+3?"},
        {"role": "assistant", "content": "<think>\n\nEasy.\n\n</think>\n\n6"},
    ],
    "empty": [],
}


# What strftime_now formats in the fixtures (the C++ test passes the same time).
NOW = (2026, 1, 2, 3, 4, 5)


# Random expressions over literals, the messages, operators, filters and
# tests: what Jinja2 renders (or refuses) for each, compared by the C++ test
# too. Left out, where Jinja2's own answer is an accident of Python: string
# % formatting, slicing what is not a sequence, reverse and items of what
# they do not apply to, printing range().
STRINGS = ["'a'", "'ab c'", "''", "' x '", "'é'", "'A-b'", '"q\\"t"', "'1'", "'42'"]
EXPR_FILTERS = ["length", "trim", "upper", "lower", "first", "last", "join", "join(',')", "default('d')", "tojson",
                "string", "list", "int", "abs", "capitalize", "title", "float", "count"]
EXPR_TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "iterable",
              "sequence", "odd", "even", "boolean", "true", "false", "divisibleby 2", "in [1, 'a']", "eq 1"]
EXPR_OPS = ["+", "-", "*", "//", "~", "==", "!=", "<", ">=", "and", "or", "in", "not in", "/"]


def random_literal(rng, depth):
    r = rng.random()
    if r < 0.25:
        return str(rng.choice([0, 1, 2, 3, -1, 7, 10]))
    if r < 0.35:
        return rng.choice(["0.5", "1.0", "2.5", "-0.25", "1e3"])
    if r < 0.6:
        return rng.choice(STRINGS)
    if r < 0.68:
        return rng.choice(["none", "true", "false"])
    if r < 0.78 and depth < 3:
        return "[" + ", ".join(random_expression(rng, depth + 1) for _ in range(rng.randint(0, 3))) + "]"
    if r < 0.83 and depth < 3:
        items = (f"{rng.choice(STRINGS)}: {random_expression(rng, depth + 1)}" for _ in range(rng.randint(0, 2)))
        return "{" + ", ".join(items) + "}"
    if r < 0.93:
        return rng.choice(["messages", "messages[0]", "messages[0].role", "messages[-1]['content']", "undefinedvar",
                           "messages|length", "messages[1:]", "'abcdef'[1:4]", "messages[::-1][0].role"])
    return rng.choice(["(range(3) | list)", "namespace(a=1).a"])


def random_expression(rng, depth=0):
    r = rng.random()
    if depth > 3 or r < 0.3:
        return random_literal(rng, depth)
    sub = lambda: random_expression(rng, depth + 1)
    if r < 0.55:
        return f"({sub()} {rng.choice(EXPR_OPS)} {sub()})"
    if r < 0.7:
        return f"{sub()} | {rng.choice(EXPR_FILTERS)}"
    if r < 0.82:
        return f"({sub()} is {rng.choice(['', 'not '])}{rng.choice(EXPR_TESTS)})"
    if r < 0.9:
        return f"(not {sub()})"
    if r < 0.97:
        return f"({sub()} if {sub()} else {sub()})"
    return f"-{random_literal(rng, depth)}"


def random_expression_renders(env, count=500, seed=30):
    import random
    rng = random.Random(seed)
    messages = CONVERSATIONS["two_turns"]
    cases = []
    for _ in range(count):
        source = "{{ " + random_expression(rng) + " }}"
        try:
            cases.append({"template": source, "text": env.from_string(source).render(messages=messages)})
        except Exception as e:  # what Jinja2 refuses, ours must refuse too
            cases.append({"template": source, "error": f"{type(e).__name__}: {e}"})
    return {"conversation": "two_turns", "cases": cases}


# Random templates of text (spaces, tabs, newlines) and tags with random
# whitespace control: the lexer's trim_blocks / lstrip_blocks / - / + rules.
def random_template(rng, depth=0):
    texts = ["", " ", "  ", "\t", "\n", " \n", "\n  ", "\n\n", "a", " b ", "c\n", "\n d \n", "  \t\n  e"]
    def tag(body, kind="%"):
        left = rng.choice(["", "", "-", "+"]) if kind != "{" else rng.choice(["", "-"])
        right = rng.choice(["", "", "-", "+"]) if kind == "%" else rng.choice(["", "-"])
        if kind == "{":
            return "{{" + left + " " + body + " " + right + "}}"
        if kind == "#":
            return "{#" + left + " " + body + " " + right + "#}"
        return "{%" + left + " " + body + " " + right + "%}"
    parts = []
    for _ in range(rng.randint(1, 4 - depth)):
        parts.append(rng.choice(texts))
        r = rng.random()
        if r < 0.25:
            outputs = ["m.role if m is defined else '-'", "loop.index if loop is defined else 'x'", "x | default('u')"]
            parts.append(tag(rng.choice(outputs), "{"))
        elif r < 0.4:
            parts.append(tag("comment", "#"))
        elif r < 0.55:
            parts.append(tag("set x = " + rng.choice(["1", "'s'", "x ~ 'y' if x is defined else 'z'"])))
        elif r < 0.8 and depth < 2:
            parts.append(tag("if " + rng.choice(["true", "false", "m is defined", "x is defined"])))
            parts.append(random_template(rng, depth + 1))
            if rng.random() < 0.4:
                parts.append(tag("else"))
                parts.append(random_template(rng, depth + 1))
            parts.append(tag("endif"))
        elif depth < 2:
            parts.append(tag("for m in messages"))
            parts.append(random_template(rng, depth + 1))
            parts.append(tag("endfor"))
    parts.append(rng.choice(texts))
    return "".join(parts)


def random_template_renders(env, count=200, seed=31):
    import random
    rng = random.Random(seed)
    messages = CONVERSATIONS["system"]
    cases = []
    for _ in range(count):
        source = random_template(rng)
        cases.append({"template": source, "text": env.from_string(source).render(messages=messages)})
    return {"conversation": "system", "cases": cases}


def environment():
    from jinja2.exceptions import TemplateError
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda format: datetime.datetime(*NOW).strftime(format)
    return env


def main():
    ensure_venv()
    import warnings
    warnings.filterwarnings("ignore", category=SyntaxWarning)  # Python's remarks on constant subscripts
    import jinja2
    from jinja2.exceptions import TemplateError, UndefinedError

    env = environment()
    renders = []
    for name, spec in TEMPLATES.items():
        template = env.from_string(spec["template"])
        tokens = {k: v for k, v in spec.items() if k.endswith("_token")}
        for conversation, messages in CONVERSATIONS.items():
            for add_generation_prompt in (False, True):
                entry = {"template": name, "conversation": conversation, "add_generation_prompt": add_generation_prompt}
                try:
                    entry["text"] = template.render(messages=messages, tools=None, documents=None,
                                                    add_generation_prompt=add_generation_prompt, **tokens)
                except UndefinedError as e:
                    entry["undefined"] = str(e)
                except TemplateError as e:
                    entry["refused"] = str(e)
                renders.append(entry)
    os.makedirs(FIXTURES, exist_ok=True)
    outputs = {
        "chat_templates.json": TEMPLATES,
        "conversations.json": CONVERSATIONS,
        "chat_renders.json": {"jinja2": jinja2.__version__, "now": NOW, "renders": renders},
        "random_expressions.json": random_expression_renders(env),
        "random_templates.json": random_template_renders(env),
    }
    for file, content in outputs.items():
        with open(os.path.join(FIXTURES, file), "w", encoding="utf-8") as f:
            json.dump(content, f, ensure_ascii=False, indent=1)
            f.write("\n")
    print(f"{len(renders)} renders by Jinja2 {jinja2.__version__} in {FIXTURES}")


if __name__ == "__main__":
    main()
