// Writes tests/data/tokenizers/known-answers.json: the token ids that an
// independent implementation of Hugging Face's tokenizer.json (the tokenizer
// code of transformers.js, npm's @huggingface/tokenizers) gives for the
// committed tokenizer.json files, so lowp's own tokenizer can be tested
// against them without node. Never run by CI; see README.md beside this file.
//
//   node tests/tokenizer_oracle/known_answers.mjs /tmp/tokoracle/node_modules
//
// The argument (or the environment's NODE_PATH, first entry) is the
// node_modules folder the oracle was installed into, outside the repository.
// Every text is encoded with add_special_tokens false: no BOS, no EOS, no
// post-processor template; added tokens written in the text ("<s>",
// "<|endoftext|>") are still matched, as Hugging Face's tokenizers do.

import { createHash } from "node:crypto";
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const dataDir = path.join(repo, "tests", "data", "tokenizers");
const textDir = path.join(repo, "tests", "data", "text");
const outPath = path.join(dataDir, "known-answers.json");

const modulesDir = process.argv[2] || (process.env.NODE_PATH || "").split(path.delimiter)[0];
if (!modulesDir || !fs.existsSync(modulesDir)) {
  console.error("usage: node known_answers.mjs NODE_MODULES_DIR  (or set NODE_PATH)");
  process.exit(2);
}

// The oracle: @huggingface/tokenizers (transformers.js 4's tokenizer code,
// zero dependencies), else @huggingface/transformers' PreTrainedTokenizer.
const require = createRequire(path.join(path.resolve(modulesDir), "_"));
function packageVersion(name) {
  const p = path.join(path.resolve(modulesDir), ...name.split("/"), "package.json");
  return JSON.parse(fs.readFileSync(p, "utf8")).version;
}
let oracle;
try {
  const { Tokenizer } = require("@huggingface/tokenizers");
  oracle = {
    package: "@huggingface/tokenizers",
    version: packageVersion("@huggingface/tokenizers"),
    make: (json, config) => new Tokenizer(json, config),
    encode: (tok, text) => tok.encode(text, { add_special_tokens: false }).ids,
  };
} catch (e) {
  const { PreTrainedTokenizer } = require("@huggingface/transformers");
  oracle = {
    package: "@huggingface/transformers",
    version: packageVersion("@huggingface/transformers"),
    make: (json, config) => new PreTrainedTokenizer(json, config),
    encode: (tok, text) => tok.encode(text, { add_special_tokens: false }),
  };
}

const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

// The ids as int32 little-endian bytes, hashed: what the C++ test recomputes.
function idsDigest(ids) {
  const buf = Buffer.alloc(ids.length * 4);
  ids.forEach((id, i) => buf.writeInt32LE(id, i * 4));
  return sha256(buf);
}

const TOKENIZERS = ["gpt2", "llama2"];
const FILES = ["tinystories-valid-head.txt", "wikitext-2-raw-test.txt"];

// Short strings where tokenizers tend to differ. Valid UTF-16 only (no lone
// surrogates), so every one is valid UTF-8 for the C++ side.
const STRINGS = [
  "",
  " ",
  "   ",
  "  leading spaces",
  "trailing spaces  ",
  "multiple     spaces   inside",
  "\t",
  "tab\tseparated\t\tvalues",
  "\r\n",
  "line one\r\nline two\r\n",
  "\n",
  "\n\n\n",
  "a\n\nb\n\n\n\nc",
  "Hello world",
  "Once upon a time",
  "Hello, World! How's it going?",
  "12345 1,000,000",
  "3.14159 and 2024-06-01",
  "I'm don't they'll we've she'd YOU'RE",
  "naïve café résumé",
  "nai\u0308ve cafe\u0301",
  "日本語のテキスト",
  "안녕하세요 세계",
  "Καλημέρα κόσμε",
  "Привет, мир! Съешь же ещё этих мягких французских булок.",
  "مرحبا بالعالم",
  "नमस्ते दुनिया",
  "👍🏽 family 👨‍👩‍👧 🤗",
  "zero\u200dwidth\u200bjoiner",
  "non\u00a0breaking\u00a0\u00a0space",
  "line\u2028separator",
  "\u0000",
  "nul\u0000inside\u0001",
  "\uFFFD",
  "<s>",
  "</s>",
  "<s>Hello</s> <unk>",
  "<|endoftext|>",
  "def f(x):\n    return x**2  # comment\n",
  "https://example.com/path?q=1&r=2 user@example.org",
  "∑_{i=1}^{n} x² ≤ ∞",
  "buffalo ".repeat(64).trimEnd(),
  "a".repeat(300),
];

// Known ids that say the files are the genuine ones.
const CHECKS = {
  gpt2: [["Hello world", [15496, 995]]],
  llama2: [["Once upon a time", [9038, 2501, 263, 931]]],
};

const result = {
  generator: "tests/tokenizer_oracle/known_answers.mjs",
  oracle: { package: oracle.package, version: oracle.version, node: process.version },
  add_special_tokens: false,
  ids_sha256: "sha256 of the ids as int32 little-endian bytes",
  tokenizers: {},
};

for (const name of TOKENIZERS) {
  const jsonPath = path.join(dataDir, name, "tokenizer.json");
  const configPath = path.join(dataDir, name, "tokenizer_config.json");
  const jsonBytes = fs.readFileSync(jsonPath);
  const config = fs.existsSync(configPath) ? JSON.parse(fs.readFileSync(configPath, "utf8")) : {};
  const tok = oracle.make(JSON.parse(jsonBytes.toString("utf8")), config);
  const encode = (text) => Array.from(oracle.encode(tok, text), Number);

  for (const [text, want] of CHECKS[name]) {
    const got = encode(text);
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      console.error(`${name}: ${JSON.stringify(text)} gave ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
      process.exit(1);
    }
  }

  const entry = {
    tokenizer_json: `${name}/tokenizer.json`,
    tokenizer_json_sha256: sha256(jsonBytes),
    files: {},
    strings: [],
  };
  for (const file of FILES) {
    const bytes = fs.readFileSync(path.join(textDir, file));
    const t0 = Date.now();
    const ids = encode(bytes.toString("utf8"));
    console.error(`${name} ${file}: ${ids.length} ids in ${Date.now() - t0} ms`);
    entry.files[file] = {
      text_sha256: sha256(bytes),
      count: ids.length,
      ids_sha256: idsDigest(ids),
      first: ids.slice(0, 64),
      last: ids.slice(-16),
    };
  }
  for (const text of STRINGS) entry.strings.push({ text, ids: encode(text) });
  result.tokenizers[name] = entry;
}

// Two-space JSON with each list of ids on one line.
const json = JSON.stringify(result, null, 2).replace(
  /\[\s*(-?\d+(?:,\s*-?\d+)*)\s*\]/g,
  (_, body) => `[${body.split(/,\s*/).join(", ")}]`,
);
fs.writeFileSync(outPath, json + "\n");
console.error(`wrote ${path.relative(repo, outPath)}`);
