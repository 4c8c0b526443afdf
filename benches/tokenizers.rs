//! Tokenizer throughput: `bpe-openai` (what ctxd counts with) against `tiktoken-rs`.
//!
//! A deterministic corpus of a few MB stands in for what agents append: source code, shell and
//! log output, JSON tool results, prose, and non-ASCII text. For o200k_base and cl100k_base the
//! bench measures each crate's one-time load cost (the first call) and its single-thread
//! throughput in MB/s, per kind of text and overall, with passes of the two crates interleaved
//! so that both see the same machine. It panics unless both crates give identical counts on
//! every sample.
//!
//! Run with `cargo bench --bench tokenizers`.

mod common;

use common::Gen;

use std::time::{Duration, Instant};

/// Total size of the corpus, in bytes.
const CORPUS_BYTES: usize = 4 * 1024 * 1024;
/// Timed passes over the corpus, per crate and encoding; the median pass is reported.
const PASSES: usize = 5;

fn main() {
    let loads = [
        ("o200k_base", load(Crate::BpeOpenai, Encoding::O200k)),
        ("o200k_base", load(Crate::Tiktoken, Encoding::O200k)),
        ("cl100k_base", load(Crate::BpeOpenai, Encoding::Cl100k)),
        ("cl100k_base", load(Crate::Tiktoken, Encoding::Cl100k)),
    ];
    let tiktoken_o200k = tiktoken_rs::o200k_base().expect("tiktoken o200k_base");
    let tiktoken_cl100k = tiktoken_rs::cl100k_base().expect("tiktoken cl100k_base");
    let counters = [
        Counter {
            encoding: "o200k_base",
            bpe: bpe_openai::o200k_base(),
            tiktoken: &tiktoken_o200k,
        },
        Counter {
            encoding: "cl100k_base",
            bpe: bpe_openai::cl100k_base(),
            tiktoken: &tiktoken_cl100k,
        },
    ];

    let corpus = corpus(CORPUS_BYTES);
    let bytes: usize = corpus.iter().map(|s| s.text.len()).sum();
    println!(
        "corpus: {} samples, {:.2} MB ({})",
        corpus.len(),
        mb(bytes),
        Kind::ALL
            .iter()
            .map(|k| format!("{} {:.2} MB", k.name(), mb(kind_bytes(&corpus, *k))))
            .collect::<Vec<_>>()
            .join(", ")
    );

    println!("\none-time load (first call)");
    println!("{:<12} {:<12} {:>10}", "encoding", "crate", "ms");
    for (encoding, (krate, elapsed)) in &loads {
        println!("{encoding:<12} {:<12} {:>10.1}", krate.name(), ms(*elapsed));
    }

    for counter in &counters {
        let tokens = counter.check_identical(&corpus);
        let [bpe, tiktoken] = counter.measure(&corpus);
        println!(
            "\n{}: identical counts on all {} samples ({tokens} tokens, {:.2} bytes/token); \
             single-thread MB/s, median of {PASSES} passes",
            counter.encoding,
            corpus.len(),
            bytes as f64 / tokens as f64
        );
        println!(
            "{:<10} {:>8} {:>12} {:>12} {:>10}",
            "text", "MB", "bpe-openai", "tiktoken-rs", "ratio"
        );
        let rows = Kind::ALL
            .iter()
            .map(|&k| (k.name(), kind_bytes(&corpus, k), bpe.of(k), tiktoken.of(k)))
            .chain([("all", bytes, bpe.total(), tiktoken.total())]);
        for (name, bytes, bpe, tiktoken) in rows {
            let (bpe, tiktoken) = (mb_per_s(bytes, bpe), mb_per_s(bytes, tiktoken));
            println!(
                "{name:<10} {:>8.2} {bpe:>12.1} {tiktoken:>12.1} {:>9.2}x",
                mb(bytes),
                bpe / tiktoken
            );
        }
    }
}

#[derive(Clone, Copy)]
enum Crate {
    BpeOpenai,
    Tiktoken,
}

impl Crate {
    fn name(self) -> &'static str {
        match self {
            Self::BpeOpenai => "bpe-openai",
            Self::Tiktoken => "tiktoken-rs",
        }
    }
}

#[derive(Clone, Copy)]
enum Encoding {
    O200k,
    Cl100k,
}

/// The time of the first count with a fresh encoding: what a process pays once. bpe-openai
/// loads its tables lazily on first use; tiktoken-rs builds them when constructed.
fn load(krate: Crate, encoding: Encoding) -> (Crate, Duration) {
    let start = Instant::now();
    let n = match (krate, encoding) {
        (Crate::BpeOpenai, Encoding::O200k) => bpe_openai::o200k_base().count("warm up"),
        (Crate::BpeOpenai, Encoding::Cl100k) => bpe_openai::cl100k_base().count("warm up"),
        (Crate::Tiktoken, Encoding::O200k) => tiktoken_rs::o200k_base()
            .expect("tiktoken o200k_base")
            .encode_ordinary("warm up")
            .len(),
        (Crate::Tiktoken, Encoding::Cl100k) => tiktoken_rs::cl100k_base()
            .expect("tiktoken cl100k_base")
            .encode_ordinary("warm up")
            .len(),
    };
    assert!(n > 0);
    (krate, start.elapsed())
}

/// One encoding as both crates implement it.
struct Counter<'a> {
    encoding: &'static str,
    bpe: &'static bpe_openai::Tokenizer,
    tiktoken: &'a tiktoken_rs::CoreBPE,
}

impl Counter<'_> {
    fn count(&self, krate: Crate, text: &str) -> usize {
        match krate {
            Crate::BpeOpenai => self.bpe.count(text),
            Crate::Tiktoken => self.tiktoken.encode_ordinary(text).len(),
        }
    }

    /// Panics unless both crates count every sample alike; returns the corpus's token count.
    fn check_identical(&self, corpus: &[Sample]) -> usize {
        let mut total = 0;
        for (i, sample) in corpus.iter().enumerate() {
            let bpe = self.count(Crate::BpeOpenai, &sample.text);
            let tiktoken = self.count(Crate::Tiktoken, &sample.text);
            assert_eq!(
                bpe,
                tiktoken,
                "{}: bpe-openai and tiktoken-rs disagree on sample {i} ({}): {:?}…",
                self.encoding,
                sample.kind.name(),
                sample.text.chars().take(200).collect::<String>()
            );
            total += bpe;
        }
        total
    }

    /// The median pass of each crate, passes interleaved.
    fn measure(&self, corpus: &[Sample]) -> [Timings; 2] {
        let mut passes = [Vec::new(), Vec::new()];
        for _ in 0..PASSES {
            for (i, krate) in [Crate::BpeOpenai, Crate::Tiktoken].into_iter().enumerate() {
                passes[i].push(self.pass(krate, corpus));
            }
        }
        passes.map(|p| Timings::median(&p))
    }

    fn pass(&self, krate: Crate, corpus: &[Sample]) -> Timings {
        let mut timings = Timings::default();
        for sample in corpus {
            let start = Instant::now();
            std::hint::black_box(self.count(krate, std::hint::black_box(&sample.text)));
            timings.per_kind[sample.kind as usize] += start.elapsed();
        }
        timings
    }
}

/// Time spent counting, per kind of text.
#[derive(Default, Clone, Copy)]
struct Timings {
    per_kind: [Duration; Kind::ALL.len()],
}

impl Timings {
    fn of(&self, kind: Kind) -> Duration {
        self.per_kind[kind as usize]
    }

    fn total(&self) -> Duration {
        self.per_kind.iter().sum()
    }

    /// The median of every kind and of the total, taken separately.
    fn median(passes: &[Timings]) -> Timings {
        let mut median = Timings::default();
        for kind in Kind::ALL {
            let mut times: Vec<Duration> = passes.iter().map(|p| p.of(kind)).collect();
            times.sort();
            median.per_kind[kind as usize] = times[times.len() / 2];
        }
        median
    }
}

// --- The corpus -------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Code,
    Logs,
    Json,
    Prose,
    NonAscii,
}

impl Kind {
    const ALL: [Kind; 5] = [
        Kind::Code,
        Kind::Logs,
        Kind::Json,
        Kind::Prose,
        Kind::NonAscii,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Code => "code",
            Self::Logs => "logs",
            Self::Json => "json",
            Self::Prose => "prose",
            Self::NonAscii => "non-ascii",
        }
    }

    /// Share of the corpus, in percent, and the size range of one sample, in bytes.
    fn shape(self) -> (usize, std::ops::Range<usize>) {
        match self {
            Self::Code => (30, 1_000..30_000),
            Self::Logs => (25, 1_000..30_000),
            Self::Json => (15, 1_000..20_000),
            Self::Prose => (20, 200..8_000),
            Self::NonAscii => (10, 200..8_000),
        }
    }
}

/// One text to count: what one event might carry.
struct Sample {
    kind: Kind,
    text: String,
}

fn kind_bytes(corpus: &[Sample], kind: Kind) -> usize {
    corpus
        .iter()
        .filter(|s| s.kind == kind)
        .map(|s| s.text.len())
        .sum()
}

/// About `total` bytes of samples, each kind its share, kinds interleaved.
fn corpus(total: usize) -> Vec<Sample> {
    let mut g = Gen::new(0x5eed_c0de);
    let mut remaining = Kind::ALL.map(|k| total * k.shape().0 / 100);
    let mut samples = Vec::new();
    while remaining.iter().any(|&r| r > 0) {
        for kind in Kind::ALL {
            if remaining[kind as usize] == 0 {
                continue;
            }
            let range = kind.shape().1;
            let size = g.between(range.start, range.end);
            let text = match kind {
                Kind::Code => g.code(size),
                Kind::Logs => g.logs(size),
                Kind::Json => g.json(size),
                Kind::Prose => g.prose(size),
                Kind::NonAscii => g.non_ascii(size),
            };
            remaining[kind as usize] = remaining[kind as usize].saturating_sub(text.len());
            samples.push(Sample { kind, text });
        }
    }
    samples
}

#[rustfmt::skip]
const WORDS: &[&str] = &[
    "the",
    "agent",
    "reads",
    "file",
    "and",
    "then",
    "runs",
    "tests",
    "which",
    "fail",
    "because",
    "config",
    "value",
    "is",
    "missing",
    "from",
    "environment",
    "we",
    "should",
    "check",
    "whether",
    "cache",
    "was",
    "invalidated",
    "after",
    "migration",
    "a",
    "request",
    "returns",
    "error",
    "when",
    "session",
    "has",
    "no",
    "events",
    "to",
    "of",
    "in",
    "that",
    "this",
    "it",
    "for",
    "on",
    "with",
    "database",
    "connection",
    "pool",
    "timeout",
    "retry",
    "budget",
    "context",
    "window",
    "token",
    "summary",
    "tool",
    "call",
    "result",
    "output",
    "module",
    "function",
    "parser",
    "handler",
    "deploy",
    "build",
    "pipeline",
    "latency",
    "throughput",
    "benchmark",
    "regression",
    "fix",
];
#[rustfmt::skip]
const IDENTS: &[&str] = &[
    "session", "event", "batch", "store", "tokens", "head_seq", "config", "request", "response",
    "client", "pool", "row", "index", "buffer", "reader", "writer", "limit", "cursor", "payload",
    "handler", "state", "result", "error", "count", "offset", "len", "items", "path", "name",
];
#[rustfmt::skip]
const TYPES: &[&str] = &[
    "String",
    "Vec<u8>",
    "Option<i64>",
    "HashMap<String, Value>",
    "Result<(), Error>",
    "usize",
    "&str",
    "Arc<dyn Store>",
    "Duration",
    "Uuid",
    "bool",
    "f64",
];
#[rustfmt::skip]
const NON_ASCII: &[&str] = &[
    "会话中的每个事件都会被记录，并在请求时返回。",
    "上下文窗口已满，需要压缩较早的工具输出。",
    "このツールの結果は長すぎるため、要約されました。",
    "テストが失敗しました：設定ファイルが見つかりません。",
    "Сессия содержит слишком много событий для одного окна контекста.",
    "Ошибка подключения к базе данных: превышено время ожидания.",
    "Die Größe der Ausgabe überschreitet das Limit; ältere Einträge werden gekürzt.",
    "Le résultat de l'outil a été tronqué : voir le fichier complet à côté.",
    "El agente leyó el archivo y ejecutó las pruebas según la configuración.",
    "세션의 모든 이벤트는 기록되며 요청 시 반환됩니다.",
    "Η σύνοψη αντικαθιστά τα παλαιότερα μηνύματα του πλαισίου.",
    "تم تجاوز حد الرموز، لذلك تم تلخيص المخرجات السابقة.",
    "यह परिणाम बहुत लंबा है, इसलिए इसका सारांश बनाया गया।",
    "✅ build passed 🚀 deploy started ⚠️ 3 warnings ❌ 1 test failed 🔁 retrying…",
];

/// Realistic text from the shared deterministic generator.
impl Gen {
    fn sentence(&mut self) -> String {
        let n = self.between(6, 20);
        let mut s: String = (0..n)
            .map(|_| self.pick(WORDS))
            .collect::<Vec<_>>()
            .join(" ");
        s[..1].make_ascii_uppercase();
        s.push_str([".", ".", ".", "?", ":", "!"][self.between(0, 6)]);
        s
    }

    /// Rust-like source: functions, structs, comments, string literals.
    fn code(&mut self, size: usize) -> String {
        let mut s = String::new();
        while s.len() < size {
            let (a, b, c) = (self.pick(IDENTS), self.pick(IDENTS), self.pick(IDENTS));
            match self.between(0, 3) {
                0 => s.push_str(&format!(
                    "/// {}\npub struct {}{} {{\n    pub {a}: {},\n    pub {b}: {},\n    {c}_{}: {},\n}}\n\n",
                    self.sentence(),
                    capitalise(a),
                    capitalise(b),
                    self.pick(TYPES),
                    self.pick(TYPES),
                    self.between(0, 9),
                    self.pick(TYPES),
                )),
                1 => s.push_str(&format!(
                    "    // {}\n    fn {a}_{b}(&self, {c}: {}) -> {} {{\n        let {a} = self.{b}.get(&{c})?;\n        if {a}.len() > {} {{\n            return Err(Error::new(format!(\"{{}} exceeds {{}}\", {a}.len(), {})));\n        }}\n        Ok({a}.iter().map(|x| x.{c} * 2).sum())\n    }}\n\n",
                    self.sentence(),
                    self.pick(TYPES),
                    self.pick(TYPES),
                    self.between(1, 10_000),
                    self.between(1, 100),
                )),
                _ => s.push_str(&format!(
                    "    for (i, {a}) in {b}.iter().enumerate() {{\n        match {a}.{c} {{\n            Some(v) if v >= {} => {b}_total += v,\n            _ => tracing::debug!(index = i, \"skipping {a}\"),\n        }}\n    }}\n",
                    self.between(0, 500),
                )),
            }
        }
        s
    }

    /// Shell and service output: build lines, test results, timestamped logs, listings, diffs.
    fn logs(&mut self, size: usize) -> String {
        let mut s = String::new();
        while s.len() < size {
            let (a, b) = (self.pick(IDENTS), self.pick(IDENTS));
            let line = match self.between(0, 6) {
                0 => format!(
                    "   Compiling {a}-{b} v{}.{}.{}\n",
                    self.between(0, 3),
                    self.between(0, 40),
                    self.between(0, 20)
                ),
                1 => format!(
                    "test {a}::tests::{b}_{} ... {}\n",
                    self.pick(WORDS),
                    ["ok", "ok", "ok", "FAILED", "ignored"][self.between(0, 5)]
                ),
                2 => format!(
                    "2025-0{}-{:02}T{:02}:{:02}:{:02}.{:03}Z {} request{{method={} route=/sessions/{}/events request_id={}}}: {}: status={} latency_ms={}\n",
                    self.between(1, 10),
                    self.between(1, 29),
                    self.between(0, 24),
                    self.between(0, 60),
                    self.between(0, 60),
                    self.between(0, 1000),
                    ["INFO", "INFO", "WARN", "DEBUG", "ERROR"][self.between(0, 5)],
                    ["GET", "POST", "DELETE"][self.between(0, 3)],
                    self.hex(32),
                    self.hex(12),
                    self.pick(WORDS),
                    [200, 201, 404, 409, 422, 503][self.between(0, 6)],
                    self.between(0, 2000)
                ),
                3 => format!(
                    "-rw-r--r--  1 agent staff {:>8} Mar {:>2} {:02}:{:02} src/{a}/{b}.rs\n",
                    self.between(100, 200_000),
                    self.between(1, 31),
                    self.between(0, 24),
                    self.between(0, 60)
                ),
                4 => format!(
                    "@@ -{},{} +{},{} @@ fn {a}()\n-    let {b} = {a}.unwrap();\n+    let {b} = {a}.context(\"{}\")?;\n",
                    self.between(1, 900),
                    self.between(1, 20),
                    self.between(1, 900),
                    self.between(1, 20),
                    self.sentence()
                ),
                _ => format!(
                    "error[E0{}]: {}\n  --> src/{a}.rs:{}:{}\n   |\n{} |     {b}.{a}()\n   |     ^^^^ {}\n\n",
                    self.between(100, 800),
                    self.sentence(),
                    self.between(1, 500),
                    self.between(1, 80),
                    self.between(1, 500),
                    self.sentence()
                ),
            };
            s.push_str(&line);
        }
        s
    }

    /// A JSON API response: an array of records, pretty-printed.
    fn json(&mut self, size: usize) -> String {
        let mut s = String::from("{\n  \"items\": [\n");
        while s.len() < size {
            s.push_str(&format!(
                "    {{\"id\": \"{}-{}-{}-{}-{}\", \"{}\": {}, \"{}\": \"{}\", \"enabled\": {}, \"score\": {}.{}, \"tags\": [\"{}\", \"{}\"]}},\n",
                self.hex(8),
                self.hex(4),
                self.hex(4),
                self.hex(4),
                self.hex(12),
                self.pick(IDENTS),
                self.between(0, 100_000),
                self.pick(IDENTS),
                self.sentence(),
                self.between(0, 2) == 1,
                self.between(0, 100),
                self.between(0, 1000),
                self.pick(WORDS),
                self.pick(WORDS)
            ));
        }
        s.push_str(&format!(
            "    null\n  ],\n  \"next_cursor\": \"{}\"\n}}\n",
            self.hex(24)
        ));
        s
    }

    /// Markdown prose: paragraphs, a heading, a list.
    fn prose(&mut self, size: usize) -> String {
        let mut s = String::new();
        while s.len() < size {
            match self.between(0, 6) {
                0 => s.push_str(&format!("## {}\n\n", self.sentence())),
                1 => s.push_str(&format!("- {}\n- {}\n\n", self.sentence(), self.sentence())),
                _ => {
                    let n = self.between(2, 6);
                    let paragraph: Vec<String> = (0..n).map(|_| self.sentence()).collect();
                    s.push_str(&paragraph.join(" "));
                    s.push_str("\n\n");
                }
            }
        }
        s
    }

    /// Text in other scripts, with emoji, between English sentences.
    fn non_ascii(&mut self, size: usize) -> String {
        let mut s = String::new();
        while s.len() < size {
            s.push_str(self.pick(NON_ASCII));
            s.push(if self.between(0, 4) == 0 { '\n' } else { ' ' });
            if self.between(0, 3) == 0 {
                s.push_str(&self.sentence());
                s.push(' ');
            }
        }
        s
    }
}

fn capitalise(word: &str) -> String {
    word.split('_')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |c| {
                c.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

fn mb(bytes: usize) -> f64 {
    bytes as f64 / 1e6
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mb_per_s(bytes: usize, time: Duration) -> f64 {
    mb(bytes) / time.as_secs_f64()
}
