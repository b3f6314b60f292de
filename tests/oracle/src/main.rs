// Reads one JSON object per line from stdin: {"root": R, "text_hex": H};
// writes one per line: {"root", "text_hex", "ok", "message", "fields"}.
// `message` is serde_json's Display of the error; `fields` maps each field
// decoded to a non-null value to serde_json::to_string of it (for the
// "value" root: the whole value under "value").
use serde_derive::Deserialize;
use serde_json::{json, Map, Value};
use std::io::{self, BufRead, Write};

// The engine's open options at revision 0a45c54: 18 fields, declared in the
// engine's order, which is also the positional order of a top-level array.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct OpenOptions {
    max_context: Option<Value>,
    expert_cache_slots: Option<Value>,
    expert_residency: Option<String>,
    power_profile: Option<String>,
    load_guard: Option<Value>,
    min_auto_context: Option<u32>,
    max_tokens_per_sec: Option<f64>,
    speculation: Option<Value>,
    speculative_drafter: Option<String>,
    steering: Option<String>,
    steering_mode: Option<String>,
    steering_scale: Option<f64>,
    steering_layers: Option<String>,
    steering_target: Option<f64>,
    steering_gate: Option<f64>,
    vision_sidecar: Option<String>,
    kv_bits: Option<String>,
    prefix_reuse: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Fast,
    Slow,
    Off,
}

// Required fields, a Vec and an enum: the paths OpenOptions lacks. (Bools it
// has since 0a45c54, prefixReuse, as an optional field; `flags` reads them in a Vec.)
#[derive(Deserialize)]
struct Strict {
    name: String,
    count: u64,
    flags: Vec<bool>,
    mode: Mode,
    opt: Option<f64>,
}

fn put<T: serde::Serialize>(m: &mut Map<String, Value>, k: &str, v: &Option<T>) {
    if let Some(v) = v {
        m.insert(k.to_string(), Value::String(serde_json::to_string(v).unwrap()));
    }
}

fn open_fields(o: &OpenOptions) -> Map<String, Value> {
    let mut m = Map::new();
    put(&mut m, "maxContext", &o.max_context);
    put(&mut m, "expertCacheSlots", &o.expert_cache_slots);
    put(&mut m, "expertResidency", &o.expert_residency);
    put(&mut m, "powerProfile", &o.power_profile);
    put(&mut m, "loadGuard", &o.load_guard);
    put(&mut m, "minAutoContext", &o.min_auto_context);
    put(&mut m, "maxTokensPerSec", &o.max_tokens_per_sec);
    put(&mut m, "speculation", &o.speculation);
    put(&mut m, "speculativeDrafter", &o.speculative_drafter);
    put(&mut m, "steering", &o.steering);
    put(&mut m, "steeringMode", &o.steering_mode);
    put(&mut m, "steeringScale", &o.steering_scale);
    put(&mut m, "steeringLayers", &o.steering_layers);
    put(&mut m, "steeringTarget", &o.steering_target);
    put(&mut m, "steeringGate", &o.steering_gate);
    put(&mut m, "visionSidecar", &o.vision_sidecar);
    put(&mut m, "kvBits", &o.kv_bits);
    put(&mut m, "prefixReuse", &o.prefix_reuse);
    m
}

fn strict_fields(s: &Strict) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("name".into(), Value::String(serde_json::to_string(&s.name).unwrap()));
    m.insert("count".into(), Value::String(s.count.to_string()));
    m.insert("flags".into(), Value::String(serde_json::to_string(&s.flags).unwrap()));
    let mode = match s.mode { Mode::Fast => "\"fast\"", Mode::Slow => "\"slow\"", Mode::Off => "\"off\"" };
    m.insert("mode".into(), Value::String(mode.into()));
    put(&mut m, "opt", &s.opt);
    m
}

fn decode(root: &str, text: &str) -> Result<Map<String, Value>, serde_json::Error> {
    match root {
        "open" => serde_json::from_str::<OpenOptions>(text).map(|o| open_fields(&o)),
        "strict" => serde_json::from_str::<Strict>(text).map(|s| strict_fields(&s)),
        _ => serde_json::from_str::<Value>(text).map(|v| {
            let mut m = Map::new();
            m.insert("value".into(), Value::String(serde_json::to_string(&v).unwrap()));
            m
        }),
    }
}

fn unhex(h: &str) -> Vec<u8> {
    (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap()).collect()
}

fn main() {
    let stdin = io::stdin();
    let stdout = io::stdout();
    let mut out = stdout.lock();
    for line in stdin.lock().lines() {
        let line = line.unwrap();
        let req: Value = serde_json::from_str(&line).unwrap();
        let root = req["root"].as_str().unwrap().to_string();
        let hex = req["text_hex"].as_str().unwrap().to_string();
        let bytes = unhex(&hex);
        let text = String::from_utf8(bytes).expect("oracle input must be UTF-8");
        let answer = match decode(&root, &text) {
            Ok(fields) => json!({"root": root, "text_hex": hex, "ok": true, "message": null, "fields": fields}),
            Err(e) => json!({"root": root, "text_hex": hex, "ok": false, "message": e.to_string(), "fields": null}),
        };
        writeln!(out, "{}", answer).unwrap();
    }
}
