// The console's own not-found page: an address it has no page for (the manager answers such
// a path with 404 and this page, never with the API's JSON).
export function NotFoundView({ path }: { path: string }) {
  return (
    <section class="not-found">
      <h1>No such page</h1>
      <p>
        The console has no page at <code>{path}</code>. It may be mistyped, or a link from an older
        console.
      </p>
      <ul>
        <li>
          <a href="/runs">Runs</a>, <a href="/sessions">sessions</a>, the <a href="/queue">queue</a>{' '}
          or the <a href="/profiles">provider profiles</a>
        </li>
        <li>
          Or jump to an id with the box at the top (<kbd>/</kbd>).
        </li>
      </ul>
    </section>
  );
}
