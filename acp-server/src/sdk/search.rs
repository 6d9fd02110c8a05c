//! `session/search`: the stored sessions whose events contain every word
//! of a query, through the session search index — what `dsh sessions
//! search` prints, for programs (editors' session pickers). One
//! workspace (`cwd`) or every one (`all`); no subagent's log; each session
//! once with its best event, best first.

use std::path::PathBuf;
use std::sync::Arc;

use jsonrpsee::types::ErrorObjectOwned;
use jsonrpsee::RpcModule;
use serde::Deserialize;
use serde_json::{json, Value};

use super::hub::Hub;
use super::{invalid, parse, rpc_error};
use crate::admin::search::{query, search, workspace, DEFAULT_LIMIT};
use crate::error::AgentError;
use crate::search::{Hit, Scope, SearchError, MAX_LIMIT};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SearchParams {
    query: String,
    #[serde(default)]
    cwd: Option<PathBuf>,
    #[serde(default)]
    all: bool,
    #[serde(default)]
    limit: Option<usize>,
}

/// A hit as the SDK shows it (camelCase, times in epoch ms, the snippet
/// raw: the client escapes it where it shows it).
fn hit_json(hit: &Hit) -> Value {
    json!({
        "sessionId": hit.session.id,
        "cwd": hit.session.cwd,
        "title": hit.session.title,
        "createdAt": hit.session.created_at,
        "seq": hit.seq,
        "eventType": hit.event_type,
        "time": hit.time,
        "surface": hit.surface,
        "snippet": hit.snippet,
    })
}

/// Registers `session/search`.
pub(super) fn register(
    module: &mut RpcModule<Hub>,
) -> Result<(), jsonrpsee::core::RegisterMethodError> {
    module.register_async_method("session/search", |params, hub, _ext| async move {
        let params: SearchParams = parse(&params)?;
        let scope = match (params.cwd, params.all) {
            (Some(cwd), false) => workspace(&cwd),
            (None, true) => Scope::All,
            (Some(_), true) => return Err(invalid("give `cwd` or `all`, not both".to_owned())),
            (None, false) => {
                return Err(invalid(
                    "give `cwd` (that workspace's sessions) or `all: true` (every workspace's)"
                        .to_owned(),
                ))
            }
        };
        let limit = params.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(invalid(format!("limit {limit}: give 1 to {MAX_LIMIT}")));
        }
        let index = Arc::clone(hub.agent.search_index());
        let hits = search(index, query(&params.query, scope, limit))
            .await
            .map_err(|err| match err {
                SearchError::EmptyQuery => invalid(err.to_string()),
                SearchError::Index(_) | SearchError::Stopped => {
                    rpc_error(&AgentError::Internal(err.to_string()))
                }
            })?;
        let hits: Vec<Value> = hits.iter().map(hit_json).collect();
        Ok::<_, ErrorObjectOwned>(json!({ "hits": hits }))
    })?;
    Ok(())
}
