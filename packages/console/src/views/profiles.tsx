// Provider profiles: configured or not and why, the last validation, a validate button that
// follows the canary turn to its outcome. No credential value ever reaches this page: the API
// returns names and hash suffixes only. Health and the work-ready summary sit beside them.
import { useState } from 'preact/hooks';
import { api, ApiError } from '../api.js';
import { Duration, ErrorBox, Field, Id, ListHead, StateBadge, Td, Time, useLoad } from '../ui.js';

export function ProfilesView() {
  const profiles = useLoad(() => api.profiles(), [], 5000);
  const health = useLoad(() => api.health(), [], 5000);
  const workReady = health.data?.extra.workReady;
  return (
    <section>
      <header class="view-head">
        <h1>Provider profiles</h1>
      </header>
      {profiles.error && <ErrorBox error={profiles.error} title="Could not list profiles" />}
      {profiles.data && (
        <table class="list">
          <ListHead columns={['Profile', 'Configured', 'Secret', 'Last validation', 'Validate']} />
          <tbody>
            {profiles.data.profiles.map((p) => (
              <tr key={p.profile} data-profile={p.profile}>
                <Td label="Profile" class="primary-cell">
                  <strong>{p.profile}</strong>
                  <div class="sub">{p.builtin ? 'built-in' : 'custom'}</div>
                </Td>
                <Td label="Configured">
                  {p.configured ? (
                    <span class="badge tone-ok">configured</span>
                  ) : (
                    <>
                      <span class="badge tone-warn">not configured</span>
                      {p.missingKeys.length > 0 && (
                        <div class="sub">missing {p.missingKeys.join(', ')}</div>
                      )}
                      {p.message && <div class="sub">{p.message}</div>}
                    </>
                  )}
                </Td>
                <Td label="Secret" class="mono sub">
                  {p.secretRef.name}
                  {p.credentialHashSuffix && <div>key …{p.credentialHashSuffix}</div>}
                </Td>
                <Td label="Last validation">
                  {p.lastValidation ? (
                    <>
                      <StateBadge state={p.lastValidation.status} />{' '}
                      <Time at={p.lastValidation.finishedAt ?? p.lastValidation.createdAt} />
                      <Duration
                        from={p.lastValidation.createdAt}
                        to={p.lastValidation.finishedAt}
                        running={p.lastValidation.status === 'running'}
                      />
                      {p.lastValidation.failureKind && (
                        <div class="sub bad-text">
                          <code>{p.lastValidation.failureKind}</code>
                          {p.lastValidation.message && `: ${p.lastValidation.message}`}
                        </div>
                      )}
                      {p.lastValidation.runId && (
                        <div class="sub">
                          canary{' '}
                          <Id
                            value={p.lastValidation.runId}
                            what="run id"
                            href={`/runs/${p.lastValidation.runId}`}
                          />
                        </div>
                      )}
                    </>
                  ) : (
                    <span class="muted">never</span>
                  )}
                </Td>
                <Td label="Validate">
                  <Validate profile={p.profile} disabled={!p.configured} onDone={profiles.reload} />
                </Td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <div class="grid">
        <div class="panel">
          <h2>Health</h2>
          {health.error && <ErrorBox error={health.error} />}
          {health.data && (
            <dl>
              <Field label="Status">
                <StateBadge state={health.data.status} />{' '}
                {health.data.ready ? 'ready' : 'not ready'}
              </Field>
              <Field label="Store">
                {health.data.store.kind},{' '}
                {health.data.store.reachable ? 'reachable' : 'unreachable'}
              </Field>
              <Field label="Auth">
                {health.data.auth.mode}, API key{' '}
                {health.data.auth.apiKeyConfigured ? 'required' : 'not configured'}
              </Field>
              <Field label="Launcher">{health.data.extra.launcher ?? '–'}</Field>
              <Field label="Version">
                {health.data.build.version} ({health.data.build.commit.slice(0, 12)})
              </Field>
            </dl>
          )}
        </div>
        <div class="panel">
          <h2>Work-ready tools</h2>
          {workReady ? (
            <ul class="tools">
              {workReady.tools.map((t) => (
                <li key={t.name} class={t.present ? '' : t.required ? 'bad-text' : 'muted'}>
                  {t.present ? '✓' : '✗'} {t.name}
                  {t.version && <span class="muted"> {t.version}</span>}
                  {t.required && !t.present && ' (required, missing)'}
                </li>
              ))}
            </ul>
          ) : (
            <p class="muted">No summary.</p>
          )}
          {workReady && <p class="sub">dependency policy: {workReady.dependencyPolicy}</p>}
        </div>
      </div>
    </section>
  );
}

const POLL_MS = 1500;

function Validate(props: { profile: string; disabled: boolean; onDone: () => void }) {
  const [status, setStatus] = useState<string | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const start = async () => {
    setError(null);
    try {
      const started = await api.validateProfile(props.profile);
      setStatus('running');
      for (;;) {
        await new Promise((r) => setTimeout(r, POLL_MS));
        const v = await api.validation(props.profile, started.validationId);
        if (v.status !== 'running') {
          setStatus(
            v.failureKind
              ? `${v.status}: ${v.failureKind}${v.message ? ` (${v.message})` : ''}`
              : v.status,
          );
          break;
        }
      }
      props.onDone();
    } catch (e) {
      setStatus(null);
      setError(e instanceof ApiError ? e : new ApiError(0, 'console-error', String(e), null));
    }
  };
  return (
    <div>
      <button disabled={props.disabled || status === 'running'} onClick={() => void start()}>
        {status === 'running' ? 'Validating…' : 'Validate'}
      </button>
      {status && status !== 'running' && <div class="sub">{status}</div>}
      {error && <ErrorBox error={error} />}
    </div>
  );
}
