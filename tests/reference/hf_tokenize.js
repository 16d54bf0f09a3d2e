#!/usr/bin/env node
// The reference for studio_data's tokenizer: Hugging Face tokenizers (the Rust library, through its
// official node bindings, version pinned in package.json).
//
//   node hf_tokenize.js TOKENIZER_JSON [--add-special-tokens] < requests.json > answers.json
//
// stdin is a JSON array; each item is one of
//   "text"                  encode this text
//   {"text": "..."}         the same; objects may add "add_special_tokens": true/false, which
//                           overrides the command line for that item
//   {"base64": "..."}       encode these raw bytes, decoded as UTF-8 with U+FFFD for invalid
//                           sequences (WHATWG rules, the same maximal-subpart rule as Rust's
//                           from_utf8_lossy and Python's errors="replace")
//   {"ids": [1, 2, 3]}      only decode these ids
// stdout is a JSON array in the same order: {"ids": [...], "decoded": "...", "decoded_skip": "..."}
// where "decoded" is decode(ids, skip_special_tokens=false) and "decoded_skip" the same with true.
// `--info` instead prints {"vocab_size": N, "vocab_size_with_added": M} and ignores stdin.
// Any failure (e.g. the tokenizer.json does not load) exits 1 with the error on stderr.
'use strict';

const fs = require('fs');
const path = require('path');

function loadTokenizers() {
  try {
    return require(path.join(__dirname, 'node_modules', 'tokenizers'));
  } catch (e) {
    process.stderr.write(`hf_tokenize.js: the npm package 'tokenizers' is not installed in ${__dirname}: ` +
                         `run scripts/setup.sh (npm ci --prefix tests/reference)\n`);
    process.exit(1);
  }
}

function textOf(item) {
  if (typeof item === 'string') return item;
  if (item && typeof item.text === 'string') return item.text;
  if (item && typeof item.base64 === 'string') {
    // ignoreBOM keeps a leading U+FEFF as text instead of eating it as a byte-order mark.
    return new TextDecoder('utf-8', {fatal: false, ignoreBOM: true}).decode(Buffer.from(item.base64, 'base64'));
  }
  throw new Error(`request item ${JSON.stringify(item).slice(0, 80)} is neither a string, {text}, {base64} nor {ids}`);
}

async function answer(tokenizer, item, addSpecialTokens) {
  let ids;
  if (item && Array.isArray(item.ids)) {
    ids = item.ids;
  } else {
    const special = item && typeof item.add_special_tokens === 'boolean' ? item.add_special_tokens : addSpecialTokens;
    const encoding = await tokenizer.encode(textOf(item), null, {addSpecialTokens: special});
    ids = encoding.getIds();
  }
  return {
    ids,
    decoded: await tokenizer.decode(ids, false),
    decoded_skip: await tokenizer.decode(ids, true),
  };
}

async function main() {
  const args = process.argv.slice(2);
  const file = args.find((a) => !a.startsWith('--'));
  if (!file) throw new Error('usage: hf_tokenize.js TOKENIZER_JSON [--add-special-tokens|--info] < requests.json');
  const {Tokenizer} = loadTokenizers();
  const tokenizer = Tokenizer.fromFile(file);
  if (args.includes('--info')) {
    process.stdout.write(JSON.stringify({
      vocab_size: tokenizer.getVocabSize(false),
      vocab_size_with_added: tokenizer.getVocabSize(true),
    }) + '\n');
    return;
  }
  const requests = JSON.parse(fs.readFileSync(0, 'utf8'));
  if (!Array.isArray(requests)) throw new Error('stdin must be a JSON array');
  const addSpecialTokens = args.includes('--add-special-tokens');
  const answers = [];
  for (const item of requests) answers.push(await answer(tokenizer, item, addSpecialTokens));
  process.stdout.write(JSON.stringify(answers) + '\n');
}

main().catch((e) => {
  process.stderr.write(`hf_tokenize.js: ${e && e.message ? e.message : e}\n`);
  process.exit(1);
});
