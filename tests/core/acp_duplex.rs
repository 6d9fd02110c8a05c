//! The ACP server in process, over an in-memory pipe: the adapter and the
//! core together, without a child process. Frames are written and read as
//! JSON lines, as an editor would.

use std::time::Duration;

use dsh_acp_server::acp;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::World;

struct Pipe {
    write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    lines: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    next_id: u64,
    /// Every frame the server wrote.
    frames: Vec<Value>,
}

impl Pipe {
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let frame = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
        self.write
            .write_all(format!("{frame}\n").as_bytes())
            .await
            .unwrap();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
                .await
                .expect("an answer within 10 s")
                .unwrap()
                .expect("the server is up");
            let value: Value = serde_json::from_str(&line).unwrap();
            self.frames.push(value.clone());
            if value["id"] == id && value.get("method").is_none() {
                return value;
            }
        }
    }
}

#[tokio::test]
async fn the_acp_server_answers_over_an_in_memory_pipe() {
    let world = World::new(&[json!({"chunks":[{"text":"Hi "},{"text":"there."}],"finish":"stop"})]);
    let (client, server) = tokio::io::duplex(1 << 16);
    let (server_read, server_write) = tokio::io::split(server);
    let transport =
        acp::transport::transport(server_read, server_write, acp::transport::DEFAULT_MAX_FRAME);
    let agent = world.agent.clone();
    let served =
        tokio::spawn(async move { acp::serve(agent, transport.lines, transport.backlog).await });
    let (client_read, client_write) = tokio::io::split(client);
    let mut pipe = Pipe {
        write: client_write,
        lines: BufReader::new(client_read).lines(),
        next_id: 0,
        frames: Vec::new(),
    };

    let init = pipe
        .call(
            "initialize",
            json!({"protocolVersion":1,"clientCapabilities":{}}),
        )
        .await;
    assert_eq!(init["result"]["protocolVersion"], 1);
    let new = pipe
        .call("session/new", json!({"cwd": world.cwd(), "mcpServers": []}))
        .await;
    let session = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let prompt = pipe
        .call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type":"text","text":"hello"}]}),
        )
        .await;
    assert_eq!(prompt["result"]["stopReason"], "end_turn");
    let kinds: Vec<&str> = pipe
        .frames
        .iter()
        .filter(|frame| frame["method"] == "session/update")
        .map(|frame| frame["params"]["update"]["sessionUpdate"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "available_commands_update",
            "session_info_update",
            "agent_message_chunk",
            "usage_update"
        ]
    );
    // A bad request is answered, and the connection lives on.
    let bad = pipe.call("session/prompt", json!({"sessionId": 7})).await;
    assert_eq!(bad["error"]["code"], -32602);
    let listed = pipe.call("session/list", json!({})).await;
    assert_eq!(
        listed["result"]["sessions"][0]["sessionId"],
        session.as_str()
    );

    drop(pipe);
    tokio::time::timeout(Duration::from_secs(5), served)
        .await
        .expect("the server ends when the client goes away")
        .unwrap()
        .unwrap();
}
