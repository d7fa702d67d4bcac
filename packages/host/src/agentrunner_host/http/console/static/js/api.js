// Talking to the host's HTTP API from the console: JSON requests and Server-Sent Event streams.
// Same origin only; the session cookie authenticates (credentials: "same-origin").

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function failure(response) {
  let code = "http_error";
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && body.error) {
      code = body.error.code || code;
      message = body.error.message || message;
    }
  } catch {
    // not JSON: keep the status line
  }
  if (response.status === 401 && location.pathname !== "/login") {
    // the session is gone (token changed, signed out elsewhere): ask for the token again
    window.location.assign(`/login?next=${encodeURIComponent(location.pathname + location.search)}`);
  }
  return new ApiError(response.status, code, message);
}

// fetch() with a JSON body and a JSON (or empty) answer; throws ApiError on an error status.
export async function api(path, { method = "GET", json, headers = {}, signal } = {}) {
  const init = { method, headers: { Accept: "application/json", ...headers }, credentials: "same-origin", signal };
  if (json !== undefined) {
    init.body = JSON.stringify(json);
    init.headers["Content-Type"] = "application/json";
  }
  const response = await fetch(path, init);
  if (!response.ok) throw await failure(response);
  if (response.status === 204) return null;
  const type = response.headers.get("content-type") || "";
  return type.includes("application/json") ? response.json() : response.text();
}

// Opens an SSE response with fetch (EventSource cannot POST or set Last-Event-ID) and calls
// onEvent({id, event, data}) per event. Resolves with the Response's headers once the stream ends.
export async function stream(path, { method = "GET", json, lastEventId, signal, onOpen, onEvent }) {
  const headers = { Accept: "text/event-stream" };
  if (lastEventId !== undefined && lastEventId !== null) headers["Last-Event-ID"] = String(lastEventId);
  const init = { method, headers, credentials: "same-origin", signal };
  if (json !== undefined) {
    init.body = JSON.stringify(json);
    headers["Content-Type"] = "application/json";
  }
  const response = await fetch(path, init);
  if (!response.ok) throw await failure(response);
  if (onOpen) onOpen(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let frame = { id: null, event: "message", data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let newline;
    while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
      if (line === "") {
        if (frame.data.length) onEvent({ id: frame.id, event: frame.event, data: frame.data.join("\n") });
        frame = { id: null, event: "message", data: [] };
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let val = colon < 0 ? "" : line.slice(colon + 1);
      if (val.startsWith(" ")) val = val.slice(1);
      if (field === "id") frame.id = val;
      else if (field === "event") frame.event = val;
      else if (field === "data") frame.data.push(val);
    }
  }
  return response.headers;
}

// Small DOM helper: el("div", {class: "x", text: "y"}, child, ...). Text is always set as text, never HTML.
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
