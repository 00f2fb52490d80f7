import { h } from "preact";
import { useState } from "preact/hooks";
import { login, register } from "../client";

// Login is the first screen: one form, two actions. Errors come from the
// server's answer (wrong password, name taken, too short) as sentences.
export function Login() {
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);

  const run = async (fn: typeof login) => {
    setError("");
    if (!username.trim() || !password) {
      setError("Enter a username and a password.");
      return;
    }
    setBusy(true);
    try {
      await fn(username.trim(), password);
    } catch (e) {
      setError((e as Error).message);
      setBusy(false);
    }
  };

  return (
    <main class="login">
      <form
        class="card"
        onSubmit={(e) => {
          e.preventDefault();
          run(login);
        }}
      >
        <h1>Welcome to Concord</h1>
        <label>
          <span>Username</span>
          <input
            name="username"
            autocomplete="username"
            value={username}
            onInput={(e) => setUsername((e.target as HTMLInputElement).value)}
            required
          />
        </label>
        <label>
          <span>Password</span>
          <input
            name="password"
            type="password"
            autocomplete="current-password"
            value={password}
            onInput={(e) => setPassword((e.target as HTMLInputElement).value)}
            required
          />
        </label>
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <div class="row">
          <button type="submit" class="primary" disabled={busy}>
            Log In
          </button>
          <button type="button" disabled={busy} onClick={() => run(register)}>
            Register
          </button>
        </div>
        <p class="hint">New here? Pick a username (2–32 characters) and a password of at least 8, then Register.</p>
      </form>
    </main>
  );
}
