#!/usr/bin/env node
// The Hugging Face side of bench_tokenizer: encodes the same documents with HF tokenizers (the
// npm package installed in tests/reference) and times it inside node, so process start-up and
// loading do not count.
//
//   node hf_bench.js TOKENIZER_JSON DOCUMENTS_FILE
//
// DOCUMENTS_FILE holds UTF-8 documents separated by U+001E (record separator). Prints one JSON
// line: {"sequential_s", "sequential_cpu_s", "batch_s", "batch_cpu_s", "tokens", "batch_tokens"}:
// one encode() awaited after another (HF on one thread at a time), then encodeBatch() over all
// documents (HF's own thread pool). CPU seconds are the whole process's (node's threads included).
'use strict';

const fs = require('fs');
const path = require('path');

async function main() {
  const [file, documentsFile] = process.argv.slice(2);
  const {Tokenizer} = require(path.join(__dirname, '..', '..', 'tests', 'reference', 'node_modules', 'tokenizers'));
  const documents = fs.readFileSync(documentsFile, 'utf8').split('\u001e');
  const options = {addSpecialTokens: false};
  // Each measurement starts from a freshly loaded tokenizer (a cold word cache), warmed up on a
  // few documents, as bench_tokenizer does for its own rows.
  const fresh = async () => {
    const tokenizer = Tokenizer.fromFile(file);
    for (const d of documents.slice(0, 8)) await tokenizer.encode(d, null, options);
    return tokenizer;
  };

  const cpuSeconds = (since) => {
    const used = process.cpuUsage(since);
    return (used.user + used.system) / 1e6;
  };
  let tokenizer = await fresh();
  let tokens = 0;
  let start = process.hrtime.bigint();
  let cpu = process.cpuUsage();
  for (const d of documents) tokens += (await tokenizer.encode(d, null, options)).getLength();
  const sequential = Number(process.hrtime.bigint() - start) / 1e9;
  const sequentialCpu = cpuSeconds(cpu);

  tokenizer = await fresh();
  start = process.hrtime.bigint();
  cpu = process.cpuUsage();
  const batch = await tokenizer.encodeBatch(documents, options);
  const batchSeconds = Number(process.hrtime.bigint() - start) / 1e9;
  const batchCpu = cpuSeconds(cpu);
  const batchTokens = batch.reduce((n, e) => n + e.getLength(), 0);
  process.stdout.write(JSON.stringify({sequential_s: sequential, sequential_cpu_s: sequentialCpu,
                                       batch_s: batchSeconds, batch_cpu_s: batchCpu, tokens,
                                       batch_tokens: batchTokens}) + '\n');
}

main().catch((e) => {
  process.stderr.write(`hf_bench.js: ${e && e.message ? e.message : e}\n`);
  process.exit(1);
});
