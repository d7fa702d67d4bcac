// The runners page's disable switch: PUT/DELETE /v1/runners/{runner_id}/disabled, then reload the page.
import { api } from "./api.js";

for (const form of document.querySelectorAll("form.switch")) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const section = form.closest("[data-runner]");
    const path = `/v1/runners/${encodeURIComponent(section.dataset.runner)}/disabled`;
    const error = section.querySelector(".error");
    try {
      if (form.dataset.action === "disable") {
        await api(path, { method: "PUT", json: { reason: form.elements.reason.value } });
      } else {
        await api(path, { method: "DELETE" });
      }
      window.location.reload();
    } catch (failure) {
      error.textContent = failure.message;
      error.hidden = false;
    }
  });
}
