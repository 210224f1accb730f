// The KAOS console's only script: live updates of server-rendered fragments (server-sent
// events) and the streamed chat (fetch). No library, nothing loaded from elsewhere.
"use strict";

function csrfToken() {
  const meta = document.querySelector('meta[name="kaos-csrf"]');
  return meta ? meta.content : "";
}

// The header's dot: green while the page's event stream is open and the cluster answers,
// red while the cluster cannot be reached (the overview's marker says so, whatever the
// stream does), grey while the console itself is not connected.
let connected = false;

function showLive() {
  const dot = document.getElementById("live");
  if (!dot) return;
  const marker = document.getElementById("cluster-state") || dot;
  const reachable = marker.dataset.cluster !== "unreachable";
  dot.dataset.cluster = reachable ? "reachable" : "unreachable";
  dot.dataset.connected = String(connected);
  dot.classList.toggle("on", connected && reachable);
  dot.classList.toggle("down", !reachable);
  dot.title = !reachable
    ? "the cluster cannot be reached"
    : connected
      ? "live: watching the cluster"
      : "not connected to the console";
}

function setLive(on) {
  connected = on;
  showLive();
}

// Re-fetch a region when the server says something changed (debounced).
function liveRegion(region) {
  let timer = null;
  const refresh = () => {
    fetch(region.dataset.src, { credentials: "same-origin" })
      .then((r) => (r.ok ? r.text() : Promise.reject(new Error(String(r.status)))))
      .then((html) => {
        region.innerHTML = html;
        region.dataset.refreshed = String(Date.now());
        showLive();
      })
      .catch(() => setLive(false));
  };
  const source = new EventSource(region.dataset.events);
  source.onopen = () => setLive(true);
  source.onerror = () => setLive(false);
  source.addEventListener("changed", () => {
    clearTimeout(timer);
    timer = setTimeout(refresh, 250);
  });
}

function newSessionId() {
  const bytes = new Uint8Array(8);
  crypto.getRandomValues(bytes);
  return "console-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function bubble(transcript, role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  const who = document.createElement("span");
  who.className = "who";
  who.textContent = role === "user" ? "you" : role === "agent" ? "agent" : "error";
  const body = document.createElement("span");
  body.className = "text";
  body.textContent = text;
  div.append(who, body);
  transcript.append(div);
  transcript.scrollTop = transcript.scrollHeight;
  return body;
}

// Split a server-sent event stream into {event, data} frames as chunks arrive.
async function* frames(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const raw = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      let data = "";
      for (const line of raw.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trim();
      }
      if (data) yield { event, data: JSON.parse(data) };
    }
  }
}

function chat(section) {
  const form = document.getElementById("chat-form");
  const session = document.getElementById("session");
  const principal = document.getElementById("principal");
  const message = document.getElementById("message");
  const send = document.getElementById("send");
  const transcript = document.getElementById("transcript");
  const memoryLink = document.getElementById("memory-link");
  const syncLink = () => {
    if (!memoryLink) return;
    const url = new URL(memoryLink.href);
    url.searchParams.set("session", session.value);
    url.searchParams.set("principal", principal.value);
    memoryLink.href = url.pathname + url.search;
  };
  session.addEventListener("change", syncLink);
  principal.addEventListener("change", syncLink);
  document.getElementById("new-session").addEventListener("click", () => {
    session.value = newSessionId();
    transcript.replaceChildren();
    syncLink();
  });
  message.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = message.value.trim();
    if (!text) return;
    bubble(transcript, "user", text);
    message.value = "";
    send.disabled = true;
    section.dataset.state = "streaming";
    const answer = bubble(transcript, "agent", "");
    answer.parentElement.classList.add("streaming");
    try {
      const response = await fetch(section.dataset.post, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-Kaos-Csrf": csrfToken() },
        body: JSON.stringify({ message: text, session: session.value, principal: principal.value }),
      });
      if (!response.ok) {
        const body = await response.json().catch(() => ({}));
        throw new Error(body.error || "the console answered " + response.status);
      }
      for await (const frame of frames(response)) {
        if (frame.event === "delta") {
          answer.textContent += frame.data.text;
          section.dataset.pieces = String(Number(section.dataset.pieces || 0) + 1);
          transcript.scrollTop = transcript.scrollHeight;
        } else if (frame.event === "error") {
          throw new Error(frame.data.message);
        }
      }
      section.dataset.state = "done";
    } catch (err) {
      bubble(transcript, "error", err.message);
      section.dataset.state = "error";
    } finally {
      answer.parentElement.classList.remove("streaming");
      send.disabled = false;
      syncLink();
    }
  });
  syncLink();
}

// A decision form posts once: a second click while the first is on its way does nothing
// (the clicked button's own value must go with the form, so it is not disabled).
function decisionForm(form) {
  form.addEventListener("submit", (e) => {
    if (form.dataset.state === "sending") e.preventDefault();
    else form.dataset.state = "sending";
  });
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("form.decision").forEach(decisionForm);
  document.querySelectorAll("[data-events]").forEach(liveRegion);
  const section = document.getElementById("chat");
  if (section) chat(section);
  const confirmForm = document.getElementById("confirm-forget");
  if (confirmForm) confirmForm.focus();
});
