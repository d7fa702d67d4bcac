// The binding form: checks it with POST /v1/bindings/check while it is edited and again before saving,
// shows what it would conflict with and where it would sit in the precedence order, and saves through
// POST /v1/bindings or PUT /v1/bindings/{id} only when the check passed.
import { api, el } from "./api.js";

const form = document.getElementById("binding-form");
const SCOPE_NAMES = ["global", "workspace", "bot", "actor", "conversation"];

class FormError extends Error {}

function specOf() {
  const f = form.elements;
  const scope = { type: f.scope_type.value };
  const scopeId = f.scope_id.value.trim();
  if (scope.type !== "global") {
    if (!scopeId) throw new FormError(`a ${scope.type} scope needs its id`);
    scope.id = scopeId;
  }
  let filters = [];
  if (f.filters.value.trim() !== "") {
    try {
      filters = JSON.parse(f.filters.value);
    } catch (failure) {
      throw new FormError(`Filters: not valid JSON (${failure.message})`);
    }
    if (!Array.isArray(filters)) throw new FormError("Filters: a JSON list is needed");
  }
  const priority = f.priority.value.trim() === "" ? 0 : Number(f.priority.value);
  if (!Number.isInteger(priority)) throw new FormError("Priority: a whole number is needed");
  return {
    binding_id: f.binding_id.value.trim(),
    agent_id: f.agent_id.value,
    scope,
    event_types: f.event_types.value.split(",").map((t) => t.trim()).filter((t) => t !== ""),
    filters,
    priority,
    enabled: f.enabled.checked,
  };
}

function describe(key) {
  const [scope, filters, explicit, priority] = key;
  const scopeName = SCOPE_NAMES[scope - 1] || `scope ${scope}`;
  return `scope ${scopeName}, ${filters} filter(s), ${explicit ? "explicit event type" : "any event type (*)"}, priority ${priority}`;
}

const box = document.getElementById("check");
const status = document.getElementById("check-status");
const conflicts = document.getElementById("check-conflicts");
const precedence = document.getElementById("check-precedence");
const order = document.getElementById("check-order");
const error = document.getElementById("form-error");

function show(result, spec) {
  box.hidden = false;
  box.dataset.ok = String(result.ok);
  status.textContent = result.ok ? "No conflict: it can be saved." : "It cannot be saved as it is:";
  status.className = result.ok ? "ok" : "error";
  conflicts.replaceChildren(
    ...Object.entries(result.conflicts).map(([other, why]) =>
      el("li", { dataset: { conflict: other } }, el("code", { text: other }), `: ${why}`),
    ),
    ...result.problems.map((problem) => el("li", { text: problem })),
  );
  precedence.textContent = result.precedence
    ? `Its precedence: ${describe(result.precedence)}. Enabled bindings in the order they are tried:`
    : spec.enabled
      ? ""
      : "Disabled: it never matches.";
  order.replaceChildren(
    ...result.order.map((id) =>
      el("li", { class: id === spec.binding_id ? "this" : "", "aria-current": id === spec.binding_id ? "true" : null }, el("code", { text: id }), id === spec.binding_id ? " (this one)" : ""),
    ),
  );
}

let generation = 0;
async function check() {
  const mine = ++generation;
  const spec = specOf();
  const result = await api("/v1/bindings/check", { method: "POST", json: spec });
  if (mine === generation) show(result, spec);
  return result;
}

function report(failure) {
  error.textContent = failure.message;
  error.hidden = false;
}

if (form) {
  const editing = form.dataset.editing === "true";
  let timer = null;
  const later = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      error.hidden = true;
      if (!form.elements.binding_id.value.trim() || !form.elements.agent_id.value) return;
      check().catch(report);
    }, 300);
  };
  form.addEventListener("input", later);
  form.addEventListener("change", later);
  document.getElementById("check-now")?.addEventListener("click", () => {
    error.hidden = true;
    if (form.reportValidity()) check().catch(report);
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.hidden = true;
    clearTimeout(timer);
    const save = document.getElementById("save");
    save.disabled = true;
    try {
      const spec = specOf();
      const result = await check();
      if (!result.ok) return; // the conflicts are on screen; nothing is written
      if (editing) {
        await api(`/v1/bindings/${encodeURIComponent(spec.binding_id)}`, { method: "PUT", json: spec });
      } else {
        await api("/v1/bindings", { method: "POST", json: spec });
      }
      window.location.assign(`/bindings?saved=${encodeURIComponent(spec.binding_id)}`);
    } catch (failure) {
      report(failure);
    } finally {
      save.disabled = false;
    }
  });
  document.getElementById("delete")?.addEventListener("click", async () => {
    const bindingId = form.elements.binding_id.value.trim();
    if (!window.confirm(`Delete binding ${bindingId}?`)) return;
    error.hidden = true;
    try {
      await api(`/v1/bindings/${encodeURIComponent(bindingId)}`, { method: "DELETE" });
      window.location.assign("/bindings");
    } catch (failure) {
      report(failure);
    }
  });
  if (editing) check().catch(report);
}
