//! The MCP server's transport: stdio, with a layer that keeps the ids of
//! the client's requests unique among those in flight.
//!
//! JSON-RPC 2.0 and MCP say a request's id must differ from that of every
//! request still in flight; rmcp's service loop takes that on trust. It
//! files the requests it is serving by id, so a second request with the id
//! of one in flight takes the first one's place: whichever ends first sends
//! its reply under that id and cancels the other, whose reply is then
//! dropped. One of the two gets no reply, or the wrong one. The same
//! happens to an id the client uses again after cancelling its request,
//! while the cancelled run is still being aborted: the new request gets
//! the cancelled one's reply. A handler cannot check for this (rmcp calls
//! it after filing the request), so the check lives here, where the
//! messages are read and written, and rmcp never sees an id twice:
//!
//! - a request whose id is in flight is answered here, with an Invalid
//!   Request error naming the id, and never reaches rmcp;
//! - every other request reaches rmcp under an id of this layer's own,
//!   unique for the session, and its reply goes back under the client's id,
//!   which is then free again;
//! - a `notifications/cancelled` frees the client's id at once (the request
//!   is over for the client); rmcp sends no reply for a cancelled request,
//!   and one it would send late is dropped here, so it cannot reach a new
//!   request with the same id. A cancellation of no request in flight is
//!   dropped: it has nothing to cancel.
//!
//! Renaming the ids, rather than only refusing duplicates, keeps this
//! independent of when rmcp forgets a request: nothing here needs to know
//! when a cancelled handler has ended.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use rmcp::RoleServer;
use rmcp::model::{ClientNotification, ErrorData, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

/// A transport whose requests reach rmcp under ids unique for the session.
pub(crate) struct UniqueIds<T> {
    inner: T,
    /// The id rmcp knows each request in flight by, by the client's id.
    ours: HashMap<RequestId, RequestId>,
    /// The client's id of each request in flight, by rmcp's.
    theirs: HashMap<RequestId, RequestId>,
    /// The last id given to a request.
    last: i64,
    /// A refusal being written. It is kept here because rmcp drops a
    /// `receive` in progress whenever another event comes first: the next
    /// `receive` finishes writing it before it reads on.
    refusal: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    /// Cancelled when the client's input ends (end-of-file), at once: rmcp
    /// itself lets the calls in flight run up to 5 s more before its
    /// session ends.
    ended: tokio_util::sync::CancellationToken,
}

impl<T: Transport<RoleServer>> UniqueIds<T> {
    /// `inner` with its ids made unique; `ended` is cancelled when the
    /// client's input ends.
    pub(crate) fn new(inner: T, ended: tokio_util::sync::CancellationToken) -> Self {
        UniqueIds {
            inner,
            ours: HashMap::new(),
            theirs: HashMap::new(),
            last: 0,
            refusal: None,
            ended,
        }
    }

    /// What to do with a message read: pass it to rmcp (its ids changed to
    /// ours), or not (`None`: a refusal was queued, or nothing to pass).
    fn incoming(
        &mut self,
        mut message: RxJsonRpcMessage<RoleServer>,
    ) -> Option<RxJsonRpcMessage<RoleServer>> {
        match &mut message {
            JsonRpcMessage::Request(request) => {
                if self.ours.contains_key(&request.id) {
                    let error = ErrorData::invalid_request(
                        format!(
                            "request id {} is already in flight: a request's id must differ \
                             from those of the requests still in flight",
                            request.id.clone().into_json_value()
                        ),
                        None,
                    );
                    let send = self
                        .inner
                        .send(JsonRpcMessage::error(error, Some(request.id.clone())));
                    self.refusal = Some(Box::pin(async move {
                        let _ = send.await;
                    }));
                    return None;
                }
                self.last += 1;
                let ours = RequestId::Number(self.last);
                let theirs = std::mem::replace(&mut request.id, ours.clone());
                self.ours.insert(theirs.clone(), ours.clone());
                self.theirs.insert(ours, theirs);
            }
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(cancelled) = &mut n.notification {
                    let params = &mut cancelled.params;
                    let ours = params
                        .request_id
                        .as_ref()
                        .and_then(|id| self.ours.remove(id))?;
                    self.theirs.remove(&ours);
                    params.request_id = Some(ours);
                }
            }
            JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => {}
        }
        Some(message)
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for UniqueIds<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let id = match &mut item {
            JsonRpcMessage::Response(r) => Some(&mut r.id),
            JsonRpcMessage::Error(e) => e.id.as_mut(),
            JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => None,
        };
        // A reply goes out under the client's id, which is then free; one
        // to a request no longer in flight (cancelled) goes nowhere.
        let known = match id {
            Some(id) => match self.theirs.remove(id) {
                Some(theirs) => {
                    self.ours.remove(&theirs);
                    *id = theirs;
                    true
                }
                None => false,
            },
            None => true,
        };
        let send = known.then(|| self.inner.send(item));
        async move {
            match send {
                Some(send) => send.await,
                None => Ok(()),
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if let Some(refusal) = self.refusal.as_mut() {
                refusal.await;
                self.refusal = None;
            }
            let Some(message) = self.inner.receive().await else {
                self.ended.cancel();
                return None;
            };
            if let Some(message) = self.incoming(message) {
                return Some(message);
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
