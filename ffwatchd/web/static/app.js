// ffwatchd's page: refreshes the server-rendered fragment every few seconds (no reload), and
// sends the actions with the token the operator typed (kept in sessionStorage, never a cookie).
"use strict";
(function () {
  const REFRESH_MS = 2000;
  const live = document.getElementById("live");
  const stateLine = document.getElementById("live-state");
  const message = document.getElementById("message");
  const auth = document.getElementById("auth");
  const token = document.getElementById("token");
  const operator = document.getElementById("operator");
  let busy = false;
  let timer = null;

  function actionsOn() {
    const page = document.getElementById("page");
    return page !== null && page.dataset.actions === "on";
  }

  function say(text, bad) {
    message.textContent = text;
    message.className = bad ? "message bad" : "message";
    message.hidden = false;
  }

  async function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    try {
      const r = await fetch(live.dataset.fragment, {cache: "no-store", credentials: "omit"});
      if (!r.ok) throw new Error("HTTP " + r.status);
      const doc = new DOMParser().parseFromString(await r.text(), "text/html");
      live.replaceChildren(...doc.body.childNodes);
      auth.hidden = !actionsOn();
      stateLine.textContent = "live, " + new Date().toLocaleTimeString();
      stateLine.classList.remove("bad");
    } catch (e) {
      stateLine.textContent = "not updated: " + e.message;
      stateLine.classList.add("bad");
    } finally {
      busy = false;
    }
  }

  async function act(el) {
    const url = el.dataset.action;
    if (el.dataset.confirm && !window.confirm(el.dataset.confirm)) return;
    const body = {};
    if (el.dataset.field) body[el.dataset.field] = el.value;
    sessionStorage.setItem("ffwatchd-token", token.value);
    localStorage.setItem("ffwatchd-operator", operator.value);
    el.disabled = true;
    try {
      const r = await fetch(url, {
        method: "POST", cache: "no-store", credentials: "omit",
        headers: {"Content-Type": "application/json", "Authorization": "Bearer " + token.value.trim(),
                  "X-Ffwatchd-Operator": operator.value.trim()},
        body: JSON.stringify(body),
      });
      let answer = {};
      try { answer = await r.json(); } catch (e) { answer = {message: "HTTP " + r.status}; }
      say((r.ok ? "" : "refused (HTTP " + r.status + "): ") + (answer.message || ""), !r.ok);
    } catch (e) {
      say("not sent: " + e.message, true);
    } finally {
      el.disabled = false;
      refresh();
    }
  }

  document.addEventListener("click", function (ev) {
    const el = ev.target.closest("button[data-action]");
    if (el) { ev.preventDefault(); act(el); }
  });
  document.addEventListener("change", function (ev) {
    const el = ev.target.closest("select[data-action]");
    if (el) act(el);
  });
  auth.addEventListener("submit", function (ev) { ev.preventDefault(); });
  document.addEventListener("visibilitychange", refresh);

  token.value = sessionStorage.getItem("ffwatchd-token") || "";
  operator.value = localStorage.getItem("ffwatchd-operator") || "";
  auth.hidden = !actionsOn();
  timer = setInterval(refresh, REFRESH_MS);
  stateLine.textContent = "live";
  window.ffwatchdRefresh = refresh;      // for a test or a console: refresh now
  void timer;
})();
