// Shared by every page: the sign-out button.
import { api } from "./api.js";

const logout = document.getElementById("logout");
if (logout) {
  logout.addEventListener("click", async () => {
    await api("/logout", { method: "POST" });
    window.location.assign("/login");
  });
}
