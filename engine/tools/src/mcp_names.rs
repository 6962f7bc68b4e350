//! Provider-safe names for MCP tools: `mcp__{server}__{tool}`, only `[A-Za-z0-9_-]`,
//! at most [`TOOL_NAME_CHARS_MAX`] characters (what model providers accept).

/// The prefix of every MCP tool name; no built-in starts with it.
pub const MCP_PREFIX: &str = "mcp__";

/// The longest tool name providers accept.
pub const TOOL_NAME_CHARS_MAX: usize = 64;

/// The permission key of a call of `tool` of MCP server `server`: `mcp:<server>:<tool>`.
pub fn permission_key(server: &str, tool: &str) -> String {
    format!("mcp:{server}:{tool}")
}

/// The status of an MCP call the server answered with `result` (its raw `tools/call`
/// result): `error` when the result says `isError`, else `ok`.
pub fn result_status(result: &serde_json::Value) -> cairn_core::event::Status {
    if result["isError"].as_bool() == Some(true) {
        cairn_core::event::Status::Error
    } else {
        cairn_core::event::Status::Ok
    }
}

/// `name` with every character outside `[A-Za-z0-9_-]` replaced by `_`.
pub fn sanitise(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "_".to_string() } else { s }
}

/// The namespaced name of `tool` of `server`, unique against `taken`: sanitised, and
/// when too long or already taken, cut and ended with a short hash of the original
/// names so that it stays unique and stable.
pub fn tool_name(server: &str, tool: &str, taken: &dyn Fn(&str) -> bool) -> String {
    let plain = format!("{MCP_PREFIX}{}__{}", sanitise(server), sanitise(tool));
    if plain.len() <= TOOL_NAME_CHARS_MAX && !taken(&plain) {
        return plain;
    }
    for salt in 0u32.. {
        let hash = cairn_store::Hash::of(format!("{server}\0{tool}\0{salt}").as_bytes()).short(8);
        let room = TOOL_NAME_CHARS_MAX - hash.len() - 1;
        let cut: String = plain.chars().take(room).collect();
        let name = format!("{cut}_{hash}");
        if !taken(&name) {
            return name;
        }
    }
    unreachable!("a u32 of salts cannot all be taken")
}

/// Why a name cannot name an MCP server (tool names are built from it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerNameError {
    /// Empty, or longer than `max` characters.
    #[error("server name '{name}' must have 1 to {max} characters")]
    Length { name: String, max: usize },
    /// A character outside `[A-Za-z0-9_-]`.
    #[error(
        "server name '{name}' has '{c}': use letters, digits, '_' and '-' (tool names are built from it)"
    )]
    Char { name: String, c: char },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_name_errors_say_what_is_wrong() {
        assert_eq!(
            ServerNameError::Length {
                name: "x".repeat(3),
                max: 2
            }
            .to_string(),
            "server name 'xxx' must have 1 to 2 characters"
        );
        assert_eq!(
            ServerNameError::Char {
                name: "a b".into(),
                c: ' '
            }
            .to_string(),
            "server name 'a b' has ' ': use letters, digits, '_' and '-' (tool names are built from it)"
        );
    }

    fn check(server: &str, tool: &str, expected: &str) {
        assert_eq!(tool_name(server, tool, &|_| false), expected);
    }

    #[test]
    fn names_are_sanitised_prefixed_and_capped() {
        check("everything", "echo", "mcp__everything__echo");
        check(
            "my server",
            "get.weather/v2",
            "mcp__my_server__get_weather_v2",
        );
        check("fs", "", "mcp__fs___");
        // At the limit: kept whole.
        let tool = "t".repeat(64 - "mcp__s__".len());
        check("s", &tool, &format!("mcp__s__{tool}"));
        // One past: cut, with a hash for uniqueness.
        let long = format!("{tool}x");
        let name = tool_name("s", &long, &|_| false);
        assert_eq!(name.len(), TOOL_NAME_CHARS_MAX, "{name}");
        assert!(name.starts_with("mcp__s__ttt"), "{name}");
        assert_ne!(name, tool_name("s", &format!("{tool}y"), &|_| false));
    }

    #[test]
    fn a_name_taken_after_sanitising_gets_a_hash() {
        let first = tool_name("s", "a.b", &|_| false);
        let second = tool_name("s", "a_b", &|n| n == first);
        assert_eq!(first, "mcp__s__a_b");
        assert!(
            second.starts_with("mcp__s__a_b_") && second != first,
            "{second}"
        );
        assert!(
            second
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        );
    }
}
