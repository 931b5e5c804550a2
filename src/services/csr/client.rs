//! A small Kubernetes API client: GET and PUT of JSON, and watch streams
//! of JSON lines, over hyper's HTTP/1.1 client and tokio-rustls (ring).
//!
//! Why not `kube` + `k8s-openapi`: the approver needs four calls (list
//! CSRs and Nodes, watch CSRs, PUT `/approval`, GET one secret); `kube`
//! brings tower, its own hyper/rustls stack, and `k8s-openapi`'s generated
//! types for every API group, minutes of compile time on the 2-core build
//! machines, for what is here ~150 lines on the HTTP and TLS crates the
//! appliance already links (the BMC client is built the same way).
//!
//! Invariants: every request has a bound (connect, TLS, answer: 10 s; a
//! watch: its `timeoutSeconds` plus slack); the bearer token is sent only
//! to the kubeconfig's server and never logged.

use std::time::Duration;

use anyhow::{Context as _, bail};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::kubeconfig::Kubeconfig;

const TIMEOUT: Duration = Duration::from_secs(10);

/// An answer: status and body.
pub struct Answer {
    pub status: StatusCode,
    pub body: Bytes,
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

pub struct Client {
    cfg: Kubeconfig,
    connector: TlsConnector,
    name: ServerName<'static>,
}

impl Client {
    pub fn new(cfg: Kubeconfig) -> anyhow::Result<Client> {
        let name = ServerName::try_from(cfg.server_name.clone())
            .with_context(|| format!("{:?} as a TLS name", cfg.server_name))?;
        Ok(Client {
            connector: TlsConnector::from(cfg.tls.clone()),
            name,
            cfg,
        })
    }

    pub fn authority(&self) -> &str {
        &self.cfg.authority
    }

    async fn connect(&self) -> anyhow::Result<Sender> {
        let tcp = tokio::time::timeout(TIMEOUT, TcpStream::connect(&self.cfg.authority))
            .await
            .context("connect: timed out")?
            .with_context(|| format!("connect to {}", self.cfg.authority))?;
        let _ = tcp.set_nodelay(true);
        let tls = tokio::time::timeout(TIMEOUT, self.connector.connect(self.name.clone(), tcp))
            .await
            .context("TLS handshake: timed out")?
            .context("TLS handshake")?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .context("HTTP handshake")?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<Request<Full<Bytes>>> {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, &self.cfg.authority)
            .header(hyper::header::ACCEPT, "application/json")
            .header(hyper::header::USER_AGENT, "crc-appliance-csr-approver");
        if body.is_some() {
            req = req.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        if let Some(a) = &self.cfg.authorization {
            req = req.header(hyper::header::AUTHORIZATION, a);
        }
        Ok(req.body(Full::new(body.unwrap_or_default()))?)
    }

    /// One call; the whole answer.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<Answer> {
        let exchange = async {
            let mut sender = self.connect().await?;
            let res = sender
                .send_request(self.request(method, path, body)?)
                .await?;
            let status = res.status();
            let body = res.into_body().collect().await?.to_bytes();
            Ok::<_, anyhow::Error>(Answer { status, body })
        };
        tokio::time::timeout(TIMEOUT, exchange)
            .await
            .with_context(|| format!("{path}: no answer in {TIMEOUT:?}"))?
    }

    /// GET `path` as JSON, which must answer 200.
    pub async fn get_json(&self, path: &str) -> Result<serde_json::Value, CallError> {
        let a = self
            .call(Method::GET, path, None)
            .await
            .map_err(CallError::Transport)?;
        if a.status != StatusCode::OK {
            return Err(CallError::Status(a.status, message(&a.body)));
        }
        serde_json::from_slice(&a.body).map_err(|e| CallError::Transport(e.into()))
    }

    /// Open a watch on `path` (with `watch=true` in it); its lines.
    pub async fn watch(&self, path: &str) -> anyhow::Result<Watch> {
        let mut sender = self.connect().await?;
        let res = tokio::time::timeout(
            TIMEOUT,
            sender.send_request(self.request(Method::GET, path, None)?),
        )
        .await
        .context("watch: no answer")??;
        if res.status() != StatusCode::OK {
            let status = res.status();
            let body = res
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            bail!("watch {path}: {status} {}", message(&body));
        }
        Ok(Watch {
            body: res.into_body(),
            buf: Vec::new(),
        })
    }
}

/// A failed call: the transport, or an answer other than the one expected.
#[derive(Debug)]
pub enum CallError {
    Transport(anyhow::Error),
    Status(StatusCode, String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Transport(e) => write!(f, "{e:#}"),
            CallError::Status(s, m) => write!(f, "{s}: {m}"),
        }
    }
}

/// A `Status` object's message, else the body's start.
pub fn message(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned())
}

/// An open watch: JSON lines as they come.
pub struct Watch {
    body: hyper::body::Incoming,
    buf: Vec<u8>,
}

impl Watch {
    /// The next event line; `None` when the server ended the watch.
    pub async fn next_line(&mut self) -> anyhow::Result<Option<Vec<u8>>> {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                return Ok(Some(line));
            }
            match self.body.frame().await {
                None => return Ok(None),
                Some(frame) => {
                    if let Ok(data) = frame?.into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
            }
        }
    }
}
