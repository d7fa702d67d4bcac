// The login form: the token goes to POST /login as JSON; the answer sets the HttpOnly session cookie.
import { api, ApiError } from "./api.js";

const form = document.getElementById("login");
const error = document.getElementById("login-error");

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  error.hidden = true;
  try {
    await api("/login", { method: "POST", json: { token: form.elements.token.value } });
    window.location.assign(form.dataset.next || "/");
  } catch (exc) {
    error.textContent = exc instanceof ApiError ? exc.message : String(exc);
    error.hidden = false;
  }
});
