#!/usr/bin/env node
// Generates the tokenizer fixtures in this folder (run from anywhere; needs scripts/setup.sh to have
// installed tests/reference/node_modules):
//
//   node tests/data/tokenizers/make_fixtures.js
//
// The trained fixtures are real BPE vocabularies learned by Hugging Face's own trainer (the npm
// `tokenizers` package) on corpus.txt plus a deterministic augmentation of it, then cut to a few
// thousand merges so that merge order matters and many corpus words stay split. Their layout mirrors
// the files those model families ship: Qwen2 (NFC, Split regex + ByteLevel), LLaMA-3 (digit groups of
// three, ignore_merges, TemplateProcessing with <|begin_of_text|>) and LLaMA-2/Mistral SentencePiece
// conversions (Prepend/Replace normalizer or a Metaspace pre-tokenizer, byte fallback). The tiny
// fixtures are written by hand to pin one behaviour each. Output is deterministic: re-running it
// reproduces the committed files byte for byte.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');

const HERE = __dirname;
const tk = require(path.join(HERE, '..', '..', 'reference', 'node_modules', 'tokenizers'));

const QWEN2_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const LLAMA3_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const SPIECE = '\u2581';

// ---- corpus ---------------------------------------------------------------------------------

function mulberry32(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Characters a text editor would not keep faithfully (CRLF, NBSP, zero-width marks, decomposed
// accents) are added here from escapes rather than typed into corpus.txt.
function escapedLines(base) {
  const accented = base.filter((l) => /[À-ɏḀ-ỿ가-힣]/.test(l));
  return [
    'Windows line endings\r\nare CRLF\r\nand old Mac used CR\ronly.',
    'non\u00a0breaking\u00a0spaces, thin\u2009spaces, narrow\u202fnbsp, ideographic\u3000space, en\u2002quad.',
    'zero\u200bwidth, joiner\u200dhere, non\u200cjoiner, BOM\ufeffinside, soft\u00adhyphen, LRM\u200eRLM\u200f.',
    'next line\u0085control, line\u2028separator, paragraph\u2029separator, vertical\u000btab, form\u000cfeed.',
    ...accented.map((l) => l.normalize('NFD')),
  ];
}

function pick(rng, list) {
  return list[Math.floor(rng() * list.length)];
}

// New word combinations, CJK runs, numbers, identifiers and emoji runs, so the trainer sees enough
// distinct pre-tokens to learn a few thousand merges from a small hand-written corpus.
function augmentedLines(base, rng) {
  const words = base.join(' ').split(/\s+/).filter(Boolean);
  const cjk = [...base.join('')].filter((c) => /[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]/.test(c));
  const english = words.filter((w) => /^[a-z]{3,}$/.test(w));
  const emoji = ['👍', '👍🏽', '❤️', '🔥', '😂', '🎉', '🚀', '✅', '👨‍👩‍👧', '🏳️‍🌈', '🇯🇵', '🤖'];
  const separators = [' ', ' ', ' ', ' ', '  ', '\t', '\n', ', ', '. '];
  const out = [];
  for (let i = 0; i < 2500; ++i) {
    let line = '';
    const n = 4 + Math.floor(rng() * 12);
    for (let k = 0; k < n; ++k) line += pick(rng, words) + pick(rng, separators);
    out.push(line.trim());
  }
  for (let i = 0; i < 800; ++i) {
    let run = '';
    const n = 2 + Math.floor(rng() * 14);
    for (let k = 0; k < n; ++k) run += pick(rng, cjk);
    out.push(run + pick(rng, ['。', '，', '！', '、', '']));
  }
  for (let i = 0; i < 800; ++i) {
    const int = Math.floor(rng() * 10 ** (1 + Math.floor(rng() * 8)));
    out.push(pick(rng, [`${int}`, `${int}.${int % 997}`, int.toLocaleString('en-US'), `-${int % 1000}`, `0x${int.toString(16)}`]));
  }
  for (let i = 0; i < 800; ++i) {
    const a = pick(rng, english), b = pick(rng, english);
    const camel = a + b[0].toUpperCase() + b.slice(1);
    out.push(pick(rng, [`${a}_${b}`, camel, `${a}.${b}()`, `self.${a}_${b} = ${b}`, `${a}::${b}<int>`]));
  }
  for (let i = 0; i < 300; ++i) {
    let run = '';
    const n = 1 + Math.floor(rng() * 4);
    for (let k = 0; k < n; ++k) run += pick(rng, emoji);
    out.push(`${pick(rng, english)}${run} ${run}`);
  }
  return out;
}

function writeTrainingCorpus() {
  const base = fs.readFileSync(path.join(HERE, 'corpus.txt'), 'utf8').split('\n');
  const lines = [...base, ...escapedLines(base), ...augmentedLines(base, mulberry32(20240615))];
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'studio-tok-')), 'corpus.txt');
  fs.writeFileSync(file, lines.join('\n') + '\n');
  return file;
}

// ---- training ---------------------------------------------------------------------------------

function emptyBpe(extra) {
  return {type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
          end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false,
          vocab: {}, merges: [], ...extra};
}

// Trains with HF's BpeTrainer through a tokenizer that has the fixture's normalizer and
// pre-tokenizer; returns the learned merges as [left, right] pairs in rank order.
function trainMerges(corpus, normalizer, preTokenizer) {
  const spec = {version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer,
                pre_tokenizer: preTokenizer, post_processor: null, decoder: null, model: emptyBpe({})};
  const tokenizer = tk.Tokenizer.fromString(JSON.stringify(spec));
  tokenizer.train([corpus]);
  const out = path.join(path.dirname(corpus), 'trained.json');
  tokenizer.save(out, false);
  return JSON.parse(fs.readFileSync(out, 'utf8')).model.merges
      .map((m) => (typeof m === 'string' ? m.split(' ') : m));
}

// GPT-2's byte-to-character table: printable bytes map to themselves, the rest to U+0100 onwards.
function byteLevelAlphabet() {
  const printable = [];
  for (let b = 0x21; b <= 0x7e; ++b) printable.push(b);
  for (let b = 0xa1; b <= 0xac; ++b) printable.push(b);
  for (let b = 0xae; b <= 0xff; ++b) printable.push(b);
  const chars = printable.map((b) => String.fromCodePoint(b));
  let next = 0;
  for (let b = 0; b < 256; ++b) {
    if (!printable.includes(b)) chars.push(String.fromCodePoint(256 + next++));
  }
  return chars;
}

// Vocabulary = `alphabet` then the first `count` usable merges' results, in rank order. A merge is
// usable when both sides are already tokens (pruning the alphabet drops merges built on it).
function buildVocab(prefix, alphabet, merges, count) {
  const vocab = {};
  for (const t of [...prefix, ...alphabet]) if (!(t in vocab)) vocab[t] = Object.keys(vocab).length;
  const kept = [];
  for (const [a, b] of merges) {
    if (kept.length === count) break;
    if (!(a in vocab) || !(b in vocab) || (a + b) in vocab) continue;
    vocab[a + b] = Object.keys(vocab).length;
    kept.push([a, b]);
  }
  return {vocab, merges: kept};
}

// ---- fixture layouts ----------------------------------------------------------------------

function addedToken(id, content, special, flags = {}) {
  return {id, content, single_word: false, lstrip: false, rstrip: false, normalized: !special,
          special, ...flags};
}

function byteLevel(flags) {
  return {type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false, ...flags};
}

function splitRegex(regex, behavior = 'Isolated', invert = false) {
  return {type: 'Split', pattern: {Regex: regex}, behavior, invert};
}

function bosTemplate(bos, id) {
  return {type: 'TemplateProcessing',
          single: [{SpecialToken: {id: bos, type_id: 0}}, {Sequence: {id: 'A', type_id: 0}}],
          pair: [{SpecialToken: {id: bos, type_id: 0}}, {Sequence: {id: 'A', type_id: 0}},
                 {SpecialToken: {id: bos, type_id: 1}}, {Sequence: {id: 'B', type_id: 1}}],
          special_tokens: {[bos]: {id: bos, ids: [id], tokens: [bos]}}};
}

function tokenizerJson({added = [], normalizer = null, preTokenizer = null, postProcessor = null,
                        decoder = null, model}) {
  return {version: '1.0', truncation: null, padding: null, added_tokens: added, normalizer,
          pre_tokenizer: preTokenizer, post_processor: postProcessor, decoder, model};
}

function specialsAfter(vocab, names) {
  const first = Object.keys(vocab).length;
  return names.map((name, i) => addedToken(first + i, name, true));
}

function qwen2Style(corpus) {
  const normalizer = {type: 'NFC'};
  const preTokenizer = {type: 'Sequence', pretokenizers: [splitRegex(QWEN2_REGEX), byteLevel({})]};
  const trained = trainMerges(corpus, normalizer, preTokenizer);
  const {vocab, merges} = buildVocab([], byteLevelAlphabet(), trained, 4000);
  return tokenizerJson({
    added: specialsAfter(vocab, ['<|endoftext|>', '<|im_start|>', '<|im_end|>']),
    normalizer, preTokenizer, postProcessor: byteLevel({}), decoder: byteLevel({}),
    // Qwen2 files store merges in the older "left right" string form.
    model: emptyBpe({vocab, merges: merges.map((m) => m.join(' '))}),
  });
}

// Whole-word tokens that no merge sequence reaches: with ignore_merges LLaMA-3 emits them whole.
const LLAMA3_DIRECT_WORDS = ['Ġtokenizers', 'Ġpangram', 'Ġembeddings', 'ĠNFC', 'Ġsequence', 'ing'];

function llama3Style(corpus) {
  const preTokenizer = {type: 'Sequence', pretokenizers: [splitRegex(LLAMA3_REGEX),
                                                          byteLevel({trim_offsets: true})]};
  const trained = trainMerges(corpus, null, preTokenizer);
  const {vocab, merges} = buildVocab([], byteLevelAlphabet(), trained, 3000);
  for (const w of LLAMA3_DIRECT_WORDS) if (!(w in vocab)) vocab[w] = Object.keys(vocab).length;
  const names = ['<|begin_of_text|>', '<|end_of_text|>', '<|reserved_special_token_0|>',
                 '<|start_header_id|>', '<|end_header_id|>', '<|eot_id|>'];
  const added = specialsAfter(vocab, names);
  return tokenizerJson({
    added, preTokenizer,
    postProcessor: {type: 'Sequence', processors: [
      byteLevel({add_prefix_space: true, use_regex: true}), bosTemplate(names[0], added[0].id)]},
    decoder: byteLevel({add_prefix_space: true, trim_offsets: true, use_regex: true}),
    model: emptyBpe({ignore_merges: true, vocab, merges}),
  });
}

// Character frequencies of the SentencePiece-normalized corpus: rare characters get no token of
// their own, so they exercise byte fallback as in the real LLaMA-2 vocabulary.
function frequentChars(corpus, minCount) {
  const counts = new Map();
  for (const c of fs.readFileSync(corpus, 'utf8').replace(/ /g, SPIECE)) {
    if (c !== '\n') counts.set(c, (counts.get(c) || 0) + 1);
  }
  return [...counts.entries()].filter(([, n]) => n >= minCount)
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([c]) => c);
}

function sentencePieceVocab(corpus) {
  // Training splits at word starts the way SentencePiece does, so no merge spans two words.
  const normalizer = {type: 'Sequence', normalizers: [
    {type: 'Prepend', prepend: SPIECE}, {type: 'Replace', pattern: {String: ' '}, content: SPIECE}]};
  const splitter = {type: 'Metaspace', replacement: SPIECE, prepend_scheme: 'never', split: true};
  const trained = trainMerges(corpus, normalizer, splitter);
  const bytes = [];
  for (let b = 0; b < 256; ++b) bytes.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
  return {normalizer, ...buildVocab(['<unk>', '<s>', '</s>', ...bytes], frequentChars(corpus, 4), trained, 3000)};
}

function spModel(vocab, merges) {
  return emptyBpe({unk_token: '<unk>', fuse_unk: true, byte_fallback: true, vocab,
                   merges: merges.map((m) => m.join(' '))});
}

const SP_SPECIALS = [addedToken(0, '<unk>', true), addedToken(1, '<s>', true), addedToken(2, '</s>', true)];

function llama2Style({normalizer, vocab, merges}) {
  return tokenizerJson({
    added: SP_SPECIALS, normalizer, postProcessor: bosTemplate('<s>', 1),
    decoder: {type: 'Sequence', decoders: [
      {type: 'Replace', pattern: {String: SPIECE}, content: ' '}, {type: 'ByteFallback'},
      {type: 'Fuse'}, {type: 'Strip', content: ' ', start: 1, stop: 0}]},
    model: spModel(vocab, merges),
  });
}

function mistralMetaspaceStyle({vocab, merges}) {
  const metaspace = (type) => ({type, replacement: SPIECE, prepend_scheme: 'first', split: false});
  return tokenizerJson({
    added: SP_SPECIALS, preTokenizer: metaspace('Metaspace'), postProcessor: bosTemplate('<s>', 1),
    decoder: {type: 'Sequence', decoders: [{type: 'ByteFallback'}, metaspace('Metaspace'), {type: 'Fuse'}]},
    model: spModel(vocab, merges),
  });
}

// ---- tiny hand-written fixtures -------------------------------------------------------------

function byteLevelVocabWith(tokens) {
  return buildVocab([], byteLevelAlphabet(), tokens.map((t) => t.split(' ')), Infinity);
}

// Ranks decide: "b c" outranks "a b", so "abc" is a|bc -> abc through "a bc", never ab|c; runs of
// "a" merge pairwise from the left; "Ġ a" only applies after the regex kept the space with the word.
function mergePriority() {
  const {vocab, merges} = byteLevelVocabWith(['b c', 'a a', 'a b', 'a bc', 'ab c', 'aa aa', 'Ġ a',
                                              'Ġa bc', 'c c', 'cc c', 'x y', 'y z', 'xy z', 'Ġ x']);
  return tokenizerJson({preTokenizer: byteLevel({use_regex: true}), decoder: byteLevel({}),
                        model: emptyBpe({vocab, merges})});
}

// Byte tokens exist only for ASCII and the two bytes of "é"; other characters fall back to <unk>
// (not fused here; the trained SentencePiece fixtures fuse).
function byteFallback() {
  const vocab = {'<unk>': 0};
  for (let b = 0; b < 128; ++b) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`] = Object.keys(vocab).length;
  vocab['<0xC3>'] = Object.keys(vocab).length;
  vocab['<0xA9>'] = Object.keys(vocab).length;
  const merges = [];
  for (const t of ['a', 'b', 'c', '▁']) vocab[t] = Object.keys(vocab).length;
  for (const [x, y] of [['a', 'b'], ['ab', 'c'], ['▁', 'abc']]) {
    vocab[x + y] = Object.keys(vocab).length;
    merges.push([x, y]);
  }
  return tokenizerJson({
    added: [addedToken(0, '<unk>', true)],
    normalizer: {type: 'Replace', pattern: {String: ' '}, content: SPIECE},
    decoder: {type: 'Sequence', decoders: [{type: 'ByteFallback'}, {type: 'Fuse'},
                                           {type: 'Replace', pattern: {String: SPIECE}, content: ' '}]},
    model: emptyBpe({unk_token: '<unk>', byte_fallback: true, vocab, merges}),
  });
}

// Added tokens of every flavour next to text without spaces: longest match first (<a> vs <a><b>),
// single_word, lstrip/rstrip, normalized tokens matched after NFKC, a token already in the vocab.
function addedTokens() {
  const {vocab, merges} = byteLevelVocabWith(['t h', 'th e', 'Ġ the', 'i n', 'in g', 'Ġ w', 'o r', 'Ġw or']);
  const first = Object.keys(vocab).length;
  const added = [
    addedToken(first, '<|sp|>', true),
    addedToken(first + 1, '<a>', true),
    addedToken(first + 2, '<a><b>', true),
    addedToken(first + 3, '[MASK]', true, {lstrip: true, rstrip: true}),
    addedToken(first + 4, 'hello', false, {single_word: true}),
    addedToken(first + 5, 'ﬁx', false),  // normalized: matches "fix" once NFKC has run
    addedToken(first + 6, 'ﬂow', false, {normalized: false}),  // matched on the raw input only
    addedToken(vocab['the'], 'the', false),  // already a vocabulary token
    addedToken(first + 7, '<r>', true, {rstrip: true}),
    addedToken(first + 8, '<l>', false, {lstrip: true, normalized: false}),
  ];
  return tokenizerJson({added, normalizer: {type: 'NFKC'},
                        preTokenizer: byteLevel({add_prefix_space: true, use_regex: true}),
                        decoder: byteLevel({}), model: emptyBpe({vocab, merges})});
}

// Digits split before the model runs, so the "1 2" merge never applies across digits.
function digits(individual) {
  const {vocab, merges} = byteLevelVocabWith(['1 2', '12 3', 'a b', 'Ġ 1', 'Ġ a']);
  return tokenizerJson({
    preTokenizer: {type: 'Sequence', pretokenizers: [
      splitRegex('\\s+', 'MergedWithNext'), {type: 'Digits', individual_digits: individual}, byteLevel({})]},
    decoder: byteLevel({}), model: emptyBpe({vocab, merges}),
  });
}

// ---- output -------------------------------------------------------------------------------

// Pretty like HF's own files, but one vocab entry or merge per line so the files stay small.
function render(tokenizer) {
  const {model, ...rest} = tokenizer;
  const {vocab, merges, ...modelRest} = model;
  const body = JSON.stringify({...rest, model: {...modelRest, vocab: '@VOCAB@', merges: '@MERGES@'}}, null, 2);
  const vocabText = '{\n' + Object.entries(vocab).map(([k, v]) => `      ${JSON.stringify(k)}: ${v}`).join(',\n') + '\n    }';
  const mergesText = '[\n' + merges.map((m) => `      ${JSON.stringify(m)}`).join(',\n') + '\n    ]';
  return body.replace('"@VOCAB@"', () => vocabText).replace('"@MERGES@"', () => mergesText) + '\n';
}

function write(name, tokenizer, config) {
  const dir = path.join(HERE, name);
  fs.mkdirSync(dir, {recursive: true});
  const file = path.join(dir, 'tokenizer.json');
  fs.writeFileSync(file, render(tokenizer));
  if (config) fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(config, null, 2) + '\n');
  const loaded = tk.Tokenizer.fromFile(file);  // HF itself must accept every fixture
  console.log(`${name}: ${loaded.getVocabSize(true)} tokens, ${tokenizer.model.merges.length} merges`);
}

function main() {
  const corpus = writeTrainingCorpus();
  const sp = sentencePieceVocab(corpus);
  write('qwen2-style', qwen2Style(corpus), {
    bos_token: null, eos_token: '<|im_end|>', pad_token: '<|endoftext|>', unk_token: null,
    tokenizer_class: 'Qwen2Tokenizer'});
  write('llama3-style', llama3Style(corpus), {
    bos_token: '<|begin_of_text|>', eos_token: '<|eot_id|>', tokenizer_class: 'PreTrainedTokenizerFast'});
  write('llama2-style', llama2Style(sp), {
    add_bos_token: true, add_eos_token: false, tokenizer_class: 'LlamaTokenizer', pad_token: null,
    bos_token: {__type: 'AddedToken', content: '<s>', lstrip: false, normalized: false, rstrip: false, single_word: false},
    eos_token: {__type: 'AddedToken', content: '</s>', lstrip: false, normalized: false, rstrip: false, single_word: false},
    unk_token: {__type: 'AddedToken', content: '<unk>', lstrip: false, normalized: false, rstrip: false, single_word: false}});
  write('mistral-metaspace-style', mistralMetaspaceStyle(sp), {
    add_bos_token: true, add_eos_token: false, bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>'});
  write('tiny-merge-priority', mergePriority());
  write('tiny-byte-fallback', byteFallback());
  write('tiny-added-tokens', addedTokens());
  write('tiny-digits-individual', digits(true));
  write('tiny-digits-contiguous', digits(false));
  fs.rmSync(path.dirname(corpus), {recursive: true, force: true});
}

main();
