// The agent form (agents/new, agents/{id}/edit): reads the generated fields back into an AgentConfig by
// their data-kind and writes it through POST /v1/agents or PUT /v1/agents/{id}. The API's admission decides;
// its error is shown as it is. Secret fields only ever hold a variable name, sent as {"env": "NAME"}.
import { api } from "./api.js";

const picker = document.getElementById("runner-pick");
if (picker) {
  // with scripts, choosing a runner shows its form at once (without, the button does)
  picker.elements.runner.addEventListener("change", () => picker.requestSubmit());
}

class FieldError extends Error {}

function jsonOf(text, what) {
  try {
    return JSON.parse(text);
  } catch (failure) {
    throw new FieldError(`${what}: not valid JSON (${failure.message})`);
  }
}

// The value of one generated field; undefined leaves the key out (the runner's default applies).
function valueOf(field) {
  const kind = field.dataset.kind;
  const label = field.querySelector("label, .label")?.textContent.trim() || field.dataset.name;
  const input = field.querySelector("input, select, textarea");
  switch (kind) {
    case "boolean":
      return input.checked;
    case "integer":
    case "float": {
      if (input.value.trim() === "") return undefined;
      const number = Number(input.value);
      if (!Number.isFinite(number) || (kind === "integer" && !Number.isInteger(number))) {
        throw new FieldError(`${label}: ${kind === "integer" ? "a whole number" : "a number"} is needed`);
      }
      return number;
    }
    case "secret": {
      const name = input.value.trim();
      if (name === "") return undefined;
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
        throw new FieldError(`${label}: the name of an environment variable (letters, digits, _) is needed`);
      }
      return { env: name };
    }
    case "model-fallback": {
      const primary = field.querySelector('[data-part="primary"]');
      if (!primary) return undefined;
      const fallbacks = [...field.querySelectorAll('[data-part="fallback"]:checked')]
        .map((box) => box.value)
        .filter((name) => name !== primary.value);
      return { primary: primary.value, fallbacks };
    }
    case "multi":
      return [...field.querySelectorAll("input[type=checkbox]:checked")].map((box) => box.value);
    case "prompt":
      return [...field.querySelectorAll("[data-message]")]
        .map((row) => ({
          role: row.querySelector('[data-part="role"]').value,
          content: row.querySelector('[data-part="content"]').value,
        }))
        .filter((message) => message.content.trim() !== "");
    case "json":
      return input.value.trim() === "" ? undefined : jsonOf(input.value, label);
    default: // string, text, select, model
      return input.value === "" ? undefined : input.value;
  }
}

function objectOf(text, what) {
  const value = text.trim() === "" ? {} : jsonOf(text, what);
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new FieldError(`${what}: a JSON object is needed`);
  }
  return value;
}

const form = document.getElementById("agent-form");
if (form) {
  // the prompt editor: add a message row from its template, remove one
  form.addEventListener("click", (event) => {
    const add = event.target.closest("[data-add-message]");
    if (add) {
      const field = add.closest("[data-field]");
      const row = field.querySelector("template[data-message-template]").content.firstElementChild.cloneNode(true);
      field.querySelector("[data-messages]").append(row);
      row.querySelector("textarea").focus();
    }
    const remove = event.target.closest("[data-remove-message]");
    if (remove) remove.closest("[data-message]").remove();
  });
  const error = document.getElementById("form-error");
  const editing = form.dataset.editing === "true";
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.hidden = true;
    const save = document.getElementById("save");
    try {
      const runnerConfig = objectOf(document.getElementById("cfg-extra").value, "Other keys");
      for (const field of form.querySelectorAll("[data-field]")) {
        const value = valueOf(field);
        if (value !== undefined) runnerConfig[field.dataset.name] = value;
        else delete runnerConfig[field.dataset.name];
      }
      const policies = objectOf(document.getElementById("policies").value, "Policies");
      const agentId = form.elements.agent_id.value.trim();
      const body = { ...policies, agent_id: agentId, runner_id: form.dataset.runner, runner_config: runnerConfig };
      const label = form.elements.label.value.trim();
      if (label) body.label = label;
      save.disabled = true;
      if (editing) {
        await api(`/v1/agents/${encodeURIComponent(agentId)}`, { method: "PUT", json: body });
      } else {
        await api("/v1/agents", { method: "POST", json: body });
      }
      window.location.assign(`/agents?saved=${encodeURIComponent(agentId)}`);
    } catch (failure) {
      error.textContent = failure.message;
      error.hidden = false;
      save.disabled = false;
    }
  });
  document.getElementById("delete")?.addEventListener("click", async () => {
    const agentId = form.elements.agent_id.value.trim();
    if (!window.confirm(`Delete agent ${agentId}?`)) return;
    error.hidden = true;
    try {
      // refused (409) while a binding still uses it; the message says which
      await api(`/v1/agents/${encodeURIComponent(agentId)}`, { method: "DELETE" });
      window.location.assign("/agents");
    } catch (failure) {
      error.textContent = failure.message;
      error.hidden = false;
    }
  });
}
