// The board's script: live updates from /events, lease countdowns, actions, keys.
// Plain JavaScript, no build step.
"use strict";
(function () {
  const body = document.body;
  const base = body.dataset.base || "";
  const live = document.getElementById("live");

  function countdowns() {
    const now = Date.now();
    for (const el of document.querySelectorAll("[data-expires]")) {
      if (!el.dataset.expires) continue;
      const left = Math.round((Date.parse(el.dataset.expires) - now) / 1000);
      if (left <= 0) { el.textContent = "expired"; el.classList.add("late"); continue; }
      const m = Math.floor(left / 60), s = left % 60;
      el.textContent = (m >= 60 ? Math.floor(m / 60) + "h " + (m % 60) + "m" : m + "m " + s + "s") + " left";
    }
  }
  countdowns();
  setInterval(countdowns, 1000);

  let pending = null;
  async function refresh() {
    pending = null;
    const columns = document.getElementById("columns");
    if (columns) {
      const response = await fetch(base + "/columns" + location.search, { credentials: "same-origin" });
      if (response.ok) { columns.innerHTML = await response.text(); countdowns(); }
      return;
    }
    const main = document.getElementById("main");
    if (body.dataset.page !== "other" && main) {
      const response = await fetch(location.href, { credentials: "same-origin" });
      if (!response.ok) return;
      const doc = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = doc.getElementById("main");
      const active = document.activeElement;
      const typing = active && main.contains(active) && /INPUT|TEXTAREA|SELECT/.test(active.tagName);
      if (fresh && !typing) {
        // An action's answer stays on screen through the refresh its own change caused.
        const said = document.getElementById("result"), keep = fresh.querySelector("#result");
        if (said && keep) { keep.textContent = said.textContent; keep.className = said.className; }
        main.innerHTML = fresh.innerHTML; bindActions(); countdowns();
      }
    }
  }
  function schedule() { if (!pending) pending = setTimeout(refresh, 100); }

  if (window.EventSource && body.dataset.page !== "other") {
    let seen = Number(body.dataset.last || 0);
    const source = new EventSource(base + "/events?after=" + seen);
    source.addEventListener("open", () => { live.textContent = "live"; live.classList.add("on"); });
    source.addEventListener("error", () => { live.textContent = "reconnecting"; live.classList.remove("on"); });
    source.addEventListener("change", (event) => {
      const batch = JSON.parse(event.data).filter((c) => c.id > seen);
      if (!batch.length) return;
      seen = batch[batch.length - 1].id;
      live.textContent = "live · change " + batch[batch.length - 1].id;
      body.dataset.lastChange = String(batch[batch.length - 1].id);
      const number = Number(body.dataset.number || 0);
      if (!number || batch.some((c) => c.number === number)) schedule();
    });
  }

  function actor() {
    let name = localStorage.getItem("workq-board-name");
    if (name === null) {
      name = (prompt("Your name, for the history (letters, digits, . _ @ -)") || "").trim();
      localStorage.setItem("workq-board-name", name);
    }
    return name;
  }

  function bindActions() {
    for (const form of document.querySelectorAll("form.action")) {
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        const holder = form.closest(".actions");
        const result = document.getElementById("result");
        const data = Object.fromEntries(new FormData(form).entries());
        const response = await fetch(
          base + "/api/issues/" + holder.dataset.number + "/" + form.dataset.action,
          {
            method: "POST",
            credentials: "same-origin",
            headers: { "content-type": "application/json", "x-workq-board": "1", "x-workq-actor": actor() },
            body: JSON.stringify(data),
          },
        );
        let answer = {};
        try { answer = await response.json(); } catch (e) { answer = { message: response.statusText }; }
        result.textContent = response.ok
          ? answer.message
          : (answer.code || response.status) + ": " + answer.message + (answer.hint ? " (" + answer.hint + ")" : "");
        result.className = response.ok ? "ok" : "error";
        result.dataset.status = String(response.status);
      });
    }
  }
  bindActions();

  // Keys: "/" to search; j and k to move between cards.
  document.addEventListener("keydown", (event) => {
    const target = event.target;
    if (/INPUT|TEXTAREA|SELECT/.test(target.tagName) || event.ctrlKey || event.metaKey || event.altKey) return;
    const search = document.getElementById("search");
    if (event.key === "/" && search) { event.preventDefault(); search.focus(); return; }
    if (event.key !== "j" && event.key !== "k") return;
    const links = Array.from(document.querySelectorAll(".card > a"));
    if (!links.length) return;
    const at = links.indexOf(document.activeElement);
    const next = event.key === "j" ? Math.min(at + 1, links.length - 1) : Math.max(at - 1, 0);
    links[at < 0 ? 0 : next].focus();
    event.preventDefault();
  });
})();
