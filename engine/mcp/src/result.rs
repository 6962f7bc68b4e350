//! A `tools/call` result turned into what the model is given: text as text, images and
//! audio as references (`[image: image/png, 68 bytes]`, never the bytes), embedded
//! resources by their text or a reference, structured content as JSON when there is no
//! text, `isError` as
//! status `error`.

use serde_json::Value;

use cairn_tools::ToolOutput;

/// Converts a raw `tools/call` result.
pub fn to_output(result: &Value) -> ToolOutput {
    let mut parts: Vec<String> = Vec::new();
    let content = result["content"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for item in content {
        parts.push(content_text(item));
    }
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
        // Text content is the server's rendering for a model; structured content is shown
        // only when there is none (the raw result keeps both).
        if !content.iter().any(|c| c["type"] == "text") {
            parts.push(serde_json::to_string_pretty(structured).unwrap_or_default());
        }
    }
    let text = parts.join("\n");
    match cairn_tools::mcp_names::result_status(result) {
        cairn_core::event::Status::Ok => ToolOutput::ok(text),
        _ => ToolOutput::error(text),
    }
}

fn content_text(item: &Value) -> String {
    let mime = item["mimeType"].as_str().unwrap_or("unknown type");
    match item["type"].as_str() {
        Some("text") => item["text"].as_str().unwrap_or("").to_string(),
        Some(kind @ ("image" | "audio")) => format!(
            "[{kind}: {mime}, {} bytes]",
            base64_len(item["data"].as_str().unwrap_or(""))
        ),
        Some("resource_link") => format!(
            "[resource link: {}{}]",
            item["uri"].as_str().unwrap_or("?"),
            item["name"]
                .as_str()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        ),
        Some("resource") => {
            let r = &item["resource"];
            let uri = r["uri"].as_str().unwrap_or("?");
            match r["text"].as_str() {
                Some(t) => format!("[resource: {uri}]\n{t}"),
                None => format!(
                    "[resource: {uri}, {}, {} bytes]",
                    r["mimeType"].as_str().unwrap_or("unknown type"),
                    base64_len(r["blob"].as_str().unwrap_or(""))
                ),
            }
        }
        _ => serde_json::to_string(item).unwrap_or_default(),
    }
}

/// The decoded length of base64 text, without decoding it.
fn base64_len(data: &str) -> usize {
    let body = data.trim_end_matches('=');
    let n = body.bytes().filter(|b| !b.is_ascii_whitespace()).count();
    n * 3 / 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Status;
    use serde_json::json;

    fn check(result: Value, status: Status, text: &str) {
        let out = to_output(&result);
        assert_eq!((out.status, out.text.as_str()), (status, text));
    }

    #[test]
    fn every_content_kind() {
        check(
            json!({"content": [{"type": "text", "text": "hello"}]}),
            Status::Ok,
            "hello",
        );
        check(
            json!({"content": [{"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}]}),
            Status::Ok,
            "[image: image/png, 5 bytes]",
        );
        check(
            json!({"content": [{"type": "audio", "data": "aGk=", "mimeType": "audio/wav"}]}),
            Status::Ok,
            "[audio: audio/wav, 2 bytes]",
        );
        check(
            json!({"content": [{"type": "resource", "resource": {"uri": "file:///a", "text": "A"}}, {"type": "resource_link", "uri": "file:///b", "name": "b"}]}),
            Status::Ok,
            "[resource: file:///a]\nA\n[resource link: file:///b (b)]",
        );
        check(
            json!({"content": [{"type": "text", "text": "bad"}], "isError": true}),
            Status::Error,
            "bad",
        );
        check(
            json!({"content": [], "structuredContent": {"a": 1}}),
            Status::Ok,
            "{\n  \"a\": 1\n}",
        );
        // Text given: structured content is not repeated.
        check(
            json!({"content": [{"type": "text", "text": "a is 1"}], "structuredContent": {"a": 1}}),
            Status::Ok,
            "a is 1",
        );
        check(
            json!({"content": [{"type": "image", "data": "", "mimeType": "image/png"}], "structuredContent": {"a": 1}}),
            Status::Ok,
            "[image: image/png, 0 bytes]\n{\n  \"a\": 1\n}",
        );
    }
}
