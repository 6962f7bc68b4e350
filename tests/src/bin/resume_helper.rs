//! A child process for the resume tests, which kill it with SIGKILL.
//!
//! ```text
//! resume_helper script HOME WS SCRIPT   start a session in WS (Durability::Always, every
//!                                       request allowed once), print "session ID", run
//!                                       the script printing "step N" as each step
//!                                       ends, end the session, print "ended"
//! resume_helper bg HOME WS [COMMAND]    start a session, run COMMAND (default
//!                                       `sleep 30`) in the background, print "session
//!                                       ID" and "ready", then wait to be killed
//! resume_helper agent HOME WS URL TASK  start a session, print "session ID", run the
//!                                       agent loop on TASK against the OpenAI-compatible
//!                                       server at URL (model "m-1"), print "answer TEXT"
//! ```

use std::error::Error;
use std::io::Write;
use std::path::Path;

use cairn_engine::permission::Policy;
use cairn_engine::{Catalog, Engine, EngineConfig, Home, script};
use cairn_store::Durability;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

fn start(home: &str, ws: &str) -> Result<Engine> {
    let mut config = EngineConfig::new(Catalog::Thoth);
    config.durability = Durability::Always;
    let mut engine = Engine::start(&Home::at(Path::new(home)), Path::new(ws), config)?;
    engine.set_approver(Box::new(Policy::AllowAll));
    println!("session {}", engine.id());
    std::io::stdout().flush()?;
    Ok(engine)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["script", home, ws, script_path] => {
            let steps = script::parse(&std::fs::read_to_string(script_path)?)?;
            let mut engine = start(home, ws)?;
            for i in 0..steps.len() {
                script::run(&mut engine, &steps[i..=i], |_| {})?;
                println!("step {}", i + 1);
                std::io::stdout().flush()?;
            }
            engine.end("script finished")?;
            println!("ended");
            Ok(())
        }
        ["bg", home, ws, command @ ..] => {
            let command = command.first().copied().unwrap_or("sleep 30");
            let mut engine = start(home, ws)?;
            engine.call(
                "shell",
                serde_json::json!({"command": command, "background": true}),
            )?;
            println!("ready");
            std::io::stdout().flush()?;
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
        ["agent", home, ws, url, task] => {
            use cairn_engine::agent::{self, AgentConfig};
            use cairn_engine::provider::{Kind, Overrides, ProviderConfig};
            let pc = ProviderConfig::from_env(
                Kind::Openai,
                &Overrides {
                    base_url: Some(format!("{url}/v1")),
                    model: Some("m-1".into()),
                    ..Overrides::default()
                },
                |_| None,
            )?;
            let mut provider = pc.build()?;
            let mut engine = start(home, ws)?;
            let run = agent::run(
                &mut engine,
                provider.as_mut(),
                Some(task),
                &AgentConfig::default(),
                |_| {},
            )?;
            println!("answer {}", run.answer);
            engine.end("answered")?;
            Ok(())
        }
        _ => Err(
            "usage: resume_helper script HOME WS SCRIPT | bg HOME WS | agent HOME WS URL TASK"
                .into(),
        ),
    }
}
