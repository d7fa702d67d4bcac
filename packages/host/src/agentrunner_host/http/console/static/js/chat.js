// The debug chat: sends an event (text plus an optional file as an artifact) through POST /v1/events and
// renders the run's results as they stream. A live run survives a reload: every result shown is kept in
// sessionStorage with its host_seq, so after a reload the page shows them again and resumes the stream with
// Last-Event-ID = the last host_seq shown; results at or below it are never shown twice.
import { api, ApiError, el, stream } from "./api.js";
import { renderMarkdown } from "./markdown.js";

const LIVE_KEY = "agentrunner.chat.live";
const CONVERSATION_KEY = "agentrunner.chat.conversation";
const AGENT_KEY = "agentrunner.chat.agent";
const RETRIES = 5;

const root = document.getElementById("chat");
const messages = document.getElementById("messages");
const agentSelect = document.getElementById("agent");
const conversationInput = document.getElementById("conversation");
const statusLine = document.getElementById("chat-status");
const composer = document.getElementById("composer");
const textArea = document.getElementById("text");
const fileInput = document.getElementById("file");
const sendButton = document.getElementById("send");
const cancelButton = document.getElementById("cancel");
const maxUpload = Number(root.dataset.maxUpload);

let live = null; // {runId, conversationId, lastSeq, results: [{seq, type, result}]}
let bubble = null; // the assistant bubble of the live run

// -- storage -------------------------------------------------------------------------------------------------

function saveLive() {
  if (live) sessionStorage.setItem(LIVE_KEY, JSON.stringify(live));
  else sessionStorage.removeItem(LIVE_KEY);
}

function loadLive() {
  try {
    const value = JSON.parse(sessionStorage.getItem(LIVE_KEY) || "null");
    return value && typeof value.runId === "string" ? value : null;
  } catch {
    return null;
  }
}

function newConversationId() {
  const bytes = crypto.getRandomValues(new Uint8Array(6));
  return "console-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function setStatus(text) {
  statusLine.textContent = text;
}

function pretty(value) {
  return JSON.stringify(value, null, 2);
}

// -- rendering -----------------------------------------------------------------------------------------------

function artifactView(ref) {
  if (!ref || !ref.artifact_id) return null;
  const href = `/artifacts/${encodeURIComponent(ref.artifact_id)}`;
  const name = ref.name || ref.artifact_id;
  const box = el("div", { class: "artifact-ref" });
  if ((ref.mime_type || "").match(/^image\/(png|jpeg|gif|webp)$/)) {
    box.append(el("img", { class: "attachment", src: href, alt: name }));
  }
  box.append(
    el("a", { href: `${href}?download=1`, download: name, dataset: { artifact: ref.artifact_id } }, `⬇ ${name}`),
    ref.size != null ? el("span", { class: "muted" }, ` (${ref.size} bytes)`) : null,
  );
  return box;
}

function userBubble(text, refs) {
  const body = el("div", { class: "body" });
  if (text) body.append(el("div", { class: "text plain" }, text));
  for (const ref of refs) body.append(artifactView(ref));
  const node = el("article", { class: "msg user" }, el("div", { class: "role" }, "you"), body);
  messages.append(node);
  return node;
}

function refsOf(item) {
  const refs = [];
  for (const part of item.contents || []) {
    if (part && part.artifact) refs.push(part.artifact);
  }
  for (const ref of item.artifacts || []) refs.push(ref);
  return refs;
}

class AssistantBubble {
  constructor(runId) {
    this.segments = el("div", { class: "body" });
    this.events = el("div", { class: "events" });
    this.tools = new Map();
    this.segment = null;
    this.node = el(
      "article",
      { class: "msg assistant", dataset: { run: runId || "" } },
      el("div", { class: "role" }, "assistant"),
      this.segments,
      this.events,
    );
    messages.append(this.node);
  }

  setRun(runId) {
    this.node.dataset.run = runId;
  }

  // Empties the bubble before its run's stored results are replayed into it.
  reset() {
    this.segments.replaceChildren();
    this.events.replaceChildren();
    this.tools.clear();
    this.segment = null;
  }

  text(chunk, { replace = false } = {}) {
    if (!this.segment) {
      this.segment = { source: "", node: el("div", { class: "segment markdown" }) };
      this.segments.append(this.segment.node);
    }
    this.segment.source = replace ? chunk : this.segment.source + chunk;
    this.segment.node.innerHTML = renderMarkdown(this.segment.source);
  }

  event(kind, seq, ...children) {
    const node = el("div", { class: `event ${kind}`, dataset: { seq: String(seq) } }, ...children);
    this.events.append(node);
    return node;
  }

  apply(seq, type, result) {
    const data = result.data || {};
    switch (type) {
      case "message.delta": {
        const chunk = data.chunk || {};
        if (chunk.content) this.text(chunk.content);
        for (const part of chunk.contents || []) if (part.artifact) this.segments.append(artifactView(part.artifact));
        break;
      }
      case "message.completed": {
        const message = data.message || {};
        if (message.content != null) this.text(message.content, { replace: true });
        for (const ref of refsOf(message)) this.segments.append(artifactView(ref));
        this.segment = null; // the next delta starts a new message
        break;
      }
      case "tool.call.started": {
        const node = this.event(
          "tool",
          seq,
          el("details", {},
            el("summary", {}, "tool ", el("code", {}, data.tool_name), el("span", { class: "muted tool-state" }, " running…")),
            el("div", { class: "muted" }, "parameters"),
            el("pre", { class: "tool-params" }, pretty(data.parameters || {})),
          ),
        );
        this.tools.set(data.tool_call_id, node);
        break;
      }
      case "tool.call.completed": {
        let node = this.tools.get(data.tool_call_id);
        if (!node) node = this.event("tool", seq, el("details", {}, el("summary", {}, "tool ", el("code", {}, data.tool_name))));
        const details = node.querySelector("details");
        const state = node.querySelector(".tool-state");
        const failed = Boolean(data.error_code);
        if (state) state.textContent = failed ? ` failed: ${data.error_code}` : " done";
        details.append(
          el("div", { class: "muted" }, failed ? "error" : "result"),
          el("pre", { class: "tool-result" }, failed ? `${data.error_code}: ${data.error_message || ""}` : pretty(data.result_preview ?? null)),
        );
        break;
      }
      case "state.updated":
        this.event("state", seq, "state ", el("code", {}, `${data.scope}:${data.key}`), " = ", el("code", {}, JSON.stringify(data.value)));
        break;
      case "artifact.created":
        this.event("artifact", seq, "artifact ", artifactView(data.artifact));
        break;
      case "action.requested":
        this.event("action", seq, "action requested ", el("code", {}, data.action), el("pre", {}, pretty(data.target || {})));
        break;
      case "run.completed": {
        const message = data.message || {};
        if (message.content && !this.segments.textContent) this.text(message.content, { replace: true });
        this.terminal(seq, "ok", "completed", data.finish_reason || "stop", result.run_id);
        break;
      }
      case "run.failed":
        this.terminal(seq, "bad", "failed", data.code, result.run_id, data.message);
        break;
      default:
        this.event("other", seq, el("code", {}, type));
    }
  }

  terminal(seq, tone, outcome, code, runId, message) {
    const node = this.event(
      `terminal ${tone}`,
      seq,
      el("strong", {}, outcome === "completed" ? "run.completed" : "run.failed"),
      " · ",
      el("code", { class: "terminal-code" }, code || ""),
      message ? el("span", {}, ` — ${message}`) : null,
      runId ? el("span", {}, " · ", el("a", { href: `/runs/${encodeURIComponent(runId)}` }, "run details")) : null,
    );
    node.dataset.outcome = outcome;
    node.dataset.code = code || "";
  }
}

function assistantFromTranscript(item, runs) {
  // One bubble per run: a run's later messages become further segments of it.
  let b = item.run_id ? runs.get(item.run_id) : undefined;
  if (b) b.segment = null;
  else {
    b = new AssistantBubble(item.run_id);
    if (item.run_id) runs.set(item.run_id, b);
  }
  if (item.content) b.text(item.content, { replace: true });
  for (const ref of refsOf(item)) b.segments.append(artifactView(ref));
  return b;
}

// -- transcript ----------------------------------------------------------------------------------------------

const REPLAYED_RUNS = 20; // the latest runs of a reopened conversation shown with their tool calls and results

// Replays a finished run's stored results into its bubble, so a reopened conversation shows its tool calls,
// state updates, artifacts and terminal as they were streamed, not only the messages the transcript keeps.
async function replayRun(b, runId) {
  const results = [];
  let after = 0;
  for (;;) {
    const page = await api(`/v1/runs/${encodeURIComponent(runId)}/results?after=${after}&limit=1000`);
    results.push(...page.results);
    if (page.done || !page.results.length) break;
    after = page.next_after;
  }
  if (!results.length) return;
  b.reset();
  for (const r of results) b.apply(r.host_seq, r.type, r.result);
  b.node.dataset.replayed = "true";
}

async function loadTranscript(conversationId, { skipRun } = {}) {
  messages.replaceChildren();
  const runs = new Map();
  let cursor = "";
  let count = 0;
  for (;;) {
    const query = new URLSearchParams({ limit: "200" });
    if (cursor) query.set("cursor", cursor);
    const page = await api(`/v1/conversations/${encodeURIComponent(conversationId)}/transcript?${query}`);
    for (const item of page.items) {
      if (item.item_type !== "message") continue;
      if (item.role === "user") userBubble(item.content, refsOf(item));
      else if (item.role === "assistant" && item.run_id !== skipRun) assistantFromTranscript(item, runs);
      count += 1;
    }
    if (!page.next_cursor) break;
    cursor = page.next_cursor;
  }
  for (const [runId, b] of [...runs].slice(-REPLAYED_RUNS)) {
    try {
      await replayRun(b, runId);
    } catch {
      // the run's results are gone (swept) or unreadable: its transcript messages stay as they are
    }
  }
  messages.scrollTop = messages.scrollHeight;
  return count;
}

// -- runs ----------------------------------------------------------------------------------------------------

function ended(type) {
  return type === "run.completed" || type === "run.failed";
}

function onResult(frame) {
  const seq = Number(frame.id);
  if (!live || !Number.isInteger(seq) || seq <= live.lastSeq) return; // already shown
  const result = JSON.parse(frame.data);
  bubble.apply(seq, frame.event, result);
  live.lastSeq = seq;
  remember(seq, frame.event, result);
  if (ended(frame.event)) live.ended = true;
  saveLive();
  messages.scrollTop = messages.scrollHeight;
}

function textOnly(entry) {
  const chunk = entry.type === "message.delta" ? (entry.result.data || {}).chunk || {} : null;
  return chunk !== null && !(chunk.contents || []).length;
}

// Keep a result for a reload. Consecutive text deltas are folded into one entry (their text joined, the
// later host_seq kept), so a long streamed reply does not fill sessionStorage with one entry per delta.
function remember(seq, type, result) {
  const entry = { seq, type, result };
  const last = live.results[live.results.length - 1];
  if (last && textOnly(last) && textOnly(entry)) {
    const chunk = last.result.data.chunk;
    chunk.content = (chunk.content || "") + (result.data.chunk.content || "");
    last.seq = seq;
    return;
  }
  live.results.push(structuredClone(entry));
}

function setBusy(busy) {
  sendButton.disabled = busy;
  cancelButton.disabled = !busy;
}

function finish() {
  const outcome = live && live.results.length ? live.results[live.results.length - 1] : null;
  setStatus(outcome ? `run ${live.runId} ended: ${outcome.type}` : "");
  live = null;
  bubble = null;
  saveLive();
  setBusy(false);
}

async function follow() {
  // Resume (or keep reading) the live run's stream after the last result shown.
  for (let attempt = 0; live && !live.ended && attempt < RETRIES; attempt += 1) {
    try {
      setStatus(`run ${live.runId} streaming…`);
      await stream(`/v1/runs/${encodeURIComponent(live.runId)}/results?stream=true`, {
        lastEventId: live.lastSeq,
        onEvent: onResult,
      });
    } catch (exc) {
      if (exc instanceof ApiError && exc.status < 500) break;
      await new Promise((resolve) => setTimeout(resolve, 500 * (attempt + 1)));
    }
  }
  if (live && !live.ended) setStatus(`run ${live.runId}: the stream stopped before the run ended`);
  finish();
}

async function uploadFile(file, conversationId) {
  if (file.size > maxUpload) throw new Error(`the file is larger than ${maxUpload} bytes`);
  const dataUrl = await new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
  const content = String(dataUrl).slice(String(dataUrl).indexOf(",") + 1);
  const answer = await api("/artifacts", {
    method: "POST",
    json: { content_base64: content, name: file.name, mime_type: file.type || null, conversation_id: conversationId },
  });
  return answer.artifact;
}

async function send() {
  const text = textArea.value;
  const file = fileInput.files[0];
  if (!text.trim() && !file) return;
  const conversationId = conversationInput.value.trim() || newConversationId();
  conversationInput.value = conversationId;
  sessionStorage.setItem(CONVERSATION_KEY, conversationId);
  setBusy(true);
  try {
    const contents = text ? [{ type: "text", text }] : [];
    const refs = [];
    if (file) {
      setStatus(`uploading ${file.name}…`);
      const ref = await uploadFile(file, conversationId);
      refs.push(ref);
      contents.push(ref.artifact_type === "image"
        ? { type: "image", artifact: ref, mime_type: ref.mime_type }
        : { type: "file", artifact: ref, name: ref.name, mime_type: ref.mime_type });
    }
    userBubble(text, refs);
    textArea.value = "";
    fileInput.value = "";
    bubble = new AssistantBubble("");
    // The file is both a content part (for runners that take multimodal input) and an attachment ref (what
    // the host passes to the others, which get the text parts only).
    const body = { conversation_id: conversationId, input: { text: text || null, contents, attachments: refs } };
    if (agentSelect.value) body.agent_id = agentSelect.value;
    for (const [field, id] of [["bot_id", "bot"], ["workspace_id", "workspace"]]) {
      const value = document.getElementById(id).value.trim();
      if (value) body[field] = value;
    }
    setStatus("sending…");
    await stream("/v1/events?stream=true", {
      method: "POST",
      json: body,
      onOpen: (response) => {
        const runId = response.headers.get("X-Run-Id");
        live = { runId, conversationId, lastSeq: 0, results: [], ended: false };
        bubble.setRun(runId);
        saveLive();
        setStatus(`run ${runId} streaming…`);
      },
      onEvent: onResult,
    });
  } catch (exc) {
    if (!live) {
      setStatus(exc instanceof ApiError ? `refused: ${exc.code}: ${exc.message}` : String(exc));
      if (bubble) bubble.event("terminal bad", 0, el("strong", {}, "not sent"), " · ", el("code", { class: "terminal-code" }, exc.code || "error"), ` — ${exc.message}`);
      bubble = null;
      setBusy(false);
      return;
    }
  }
  if (live && !live.ended) await follow(); // the connection dropped mid-run: resume
  else finish();
}

async function cancel() {
  if (!live) return;
  cancelButton.disabled = true;
  setStatus(`cancelling run ${live.runId}…`);
  try {
    await api(`/v1/runs/${encodeURIComponent(live.runId)}/cancel`, { method: "POST" });
  } catch (exc) {
    setStatus(`cancel failed: ${exc.message}`);
    cancelButton.disabled = false;
  }
}

async function openConversation(conversationId, { restore = null } = {}) {
  conversationInput.value = conversationId;
  sessionStorage.setItem(CONVERSATION_KEY, conversationId);
  const url = new URL(location.href);
  url.searchParams.set("conversation", conversationId);
  history.replaceState(null, "", url);
  try {
    const count = await loadTranscript(conversationId, { skipRun: restore ? restore.runId : undefined });
    setStatus(count ? `${count} messages` : "new conversation");
  } catch (exc) {
    setStatus(`transcript: ${exc.message}`);
  }
  root.dataset.ready = "true";
  if (restore) {
    live = restore;
    bubble = new AssistantBubble(live.runId);
    for (const r of live.results) bubble.apply(r.seq, r.type, r.result);
    setBusy(true);
    await follow();
  }
}

// -- wiring --------------------------------------------------------------------------------------------------

composer.addEventListener("submit", (event) => {
  event.preventDefault();
  send();
});
textArea.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    if (!sendButton.disabled) send();
  }
});
cancelButton.addEventListener("click", cancel);
agentSelect.addEventListener("change", () => sessionStorage.setItem(AGENT_KEY, agentSelect.value));
document.getElementById("open").addEventListener("click", () => {
  const id = conversationInput.value.trim();
  if (id && !live) openConversation(id);
});
document.getElementById("new").addEventListener("click", () => {
  if (!live) openConversation(newConversationId());
});

// ?agent=<id> (the agents page's "Chat" link) picks the agent; otherwise this tab's last choice
const savedAgent = new URL(location.href).searchParams.get("agent") ?? sessionStorage.getItem(AGENT_KEY);
if (savedAgent !== null && [...agentSelect.options].some((o) => o.value === savedAgent)) agentSelect.value = savedAgent;
const restore = loadLive();
const initial = restore
  ? restore.conversationId
  : new URL(location.href).searchParams.get("conversation") || sessionStorage.getItem(CONVERSATION_KEY) || newConversationId();
openConversation(initial, { restore });
