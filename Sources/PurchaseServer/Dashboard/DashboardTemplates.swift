import Mustache

/// The dashboard's pages: Mustache templates kept in the binary (one file to deploy), rendered with HTML escaping
/// for every `{{value}}`. Only `{{{…}}}` is unescaped, and only for SVG the server drew from numbers.
enum DashboardTemplates {
    static let library: MustacheLibrary = {
        var library = MustacheLibrary()
        for (name, text) in templates {
            // The templates are constants of this file: a parse error is a programming error caught by any test.
            try! library.register(text, named: name)
        }
        return library
    }()

    static let templates: [String: String] = [
        "head": head, "foot": foot, "login": login, "overview": overview, "account": account, "orders": orders,
        "notifications": notifications, "webhooks": webhooks, "search": search, "message": message, "revenue": revenue,
    ]

    static let head = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        {{#frame}}<title>{{title}} · IAPKit</title><link rel="stylesheet" href="/dashboard/style.css"></head>
        <body><header><a class="brand" href="/dashboard">IAPKit</a>
        {{#signedIn}}<nav><a href="/dashboard">Overview</a><a href="/dashboard/revenue">Revenue</a><a href="/dashboard/orders">Lost orders</a>
        <a href="/dashboard/notifications">Notifications</a><a href="/dashboard/webhooks">Webhooks</a></nav>
        <form class="search" method="get" action="/dashboard/search"><input name="q" aria-label="Search" value="{{query}}"
        placeholder="transaction id, original transaction id, order id, appAccountToken or account"><button id="search">Search</button></form>
        <form method="post" action="/dashboard/logout"><input type="hidden" name="csrf" value="{{csrf}}"><button class="quiet">Sign out</button></form>
        {{/signedIn}}</header><main>
        {{#flash}}<p class="flash" role="status" id="flash">{{flash}}</p>{{/flash}}
        {{#problem}}<p class="problem" role="alert" id="problem">{{problem}}</p>{{/problem}}{{/frame}}
        """

    static let foot = """
        </main></body></html>
        """

    static let login = """
        {{> head}}
        <h1>Sign in</h1>
        <form method="post" action="/dashboard/login" class="login">
        <input type="hidden" name="login" value="{{loginToken}}">
        <label>Admin key <input type="password" name="key" id="key" autocomplete="current-password" required autofocus></label>
        <button id="signin">Sign in</button>
        </form>
        {{> foot}}
        """

    static let overview = """
        {{> head}}
        <h1>Overview</h1>
        <section class="cards">
        <a class="card" href="/dashboard/orders"><b>{{lostOrders}}</b> lost orders waiting</a>
        <div class="card"><b>{{notificationsStored}}</b> notifications stored, {{notificationsLastDay}} in the last 24 h</div>
        <div class="card"><b>{{notificationsRefused}}</b> notifications refused since this server started</div>
        <a class="card" href="/dashboard/search?q="><b>{{unboundTransactions}}</b> transactions no account holds</a>
        <a class="card" href="/dashboard/webhooks?state=failed"><b>{{webhookEventsFailed}}</b> webhook events failed</a>
        </section>
        <h2>Active subscriptions by product</h2>
        {{#hasActive}}<figure>{{{activeChart}}}</figure>
        <table><thead><tr><th>Product</th><th class="n">Active</th></tr></thead><tbody>
        {{#active}}<tr><td>{{productId}}</td><td class="n">{{count}}</td></tr>{{/active}}
        </tbody></table>{{/hasActive}}
        {{^hasActive}}<p class="empty">No active subscription.</p>{{/hasActive}}
        <h2>The last {{dayCount}} days (UTC)</h2>
        <div class="charts">
        {{#charts}}<figure><figcaption>{{title}}: {{total}}</figcaption>{{{svg}}}</figure>{{/charts}}
        </div>
        {{> foot}}
        """

    static let revenue = """
        {{> head}}
        <h1>Revenue</h1>
        <h2>Now <span class="note">{{at}} UTC, {{environment}}</span><a class="csv" href="{{overviewCSV}}">CSV</a></h2>
        <section class="cards" id="figures">
        <div class="card" id="active-subscriptions"><b>{{activeSubscriptions}}</b> active subscriptions</div>
        <div class="card" id="active-trials"><b>{{activeTrials}}</b> active trials</div>
        <div class="card" id="grace-period"><b>{{inGracePeriod}}</b> in grace period</div>
        <div class="card" id="billing-retry"><b>{{inBillingRetry}}</b> in billing retry</div>
        {{#mrr}}<div class="card mrr"><b>{{amount}}</b> MRR</div>{{/mrr}}
        {{^hasMrr}}<div class="card mrr"><b>0</b> MRR: no paying subscription</div>{{/hasMrr}}
        </section>
        {{#unpriced}}<p class="note" id="unpriced">{{unpriced}}</p>{{/unpriced}}
        {{#spans}}<h2>Revenue: {{title}}<a class="csv" href="{{csv}}">CSV</a></h2>
        {{#hasRows}}<table id="{{id}}"><thead><tr><th>Currency</th><th class="n">Gross</th><th class="n">Refunded</th><th class="n">Net</th>
        <th class="n">Transactions</th><th class="n">Refunds</th></tr></thead><tbody>
        {{#rows}}<tr><td>{{currency}}</td><td class="n">{{gross}}</td><td class="n">{{refunded}}</td><td class="n">{{net}}</td>
        <td class="n">{{transactions}}</td><td class="n">{{refunds}}</td></tr>{{/rows}}
        </tbody></table>{{/hasRows}}
        {{^hasRows}}<p class="empty" id="{{id}}">No money taken.</p>{{/hasRows}}{{/spans}}
        {{#approximate}}<p class="approximate" id="approximate">Approximate total in {{currency}}, at the configured rates: MRR ≈ {{mrr}};
        net revenue ≈ {{net}} all time, ≈ {{netLastDays}} in the last 30 days.{{#unconverted}} Not converted (no rate): {{unconverted}}.{{/unconverted}}</p>{{/approximate}}
        <h2>Over time: the last {{intervalTitle}} (UTC)</h2>
        <p class="tabs" id="intervals">{{#intervals}}<a href="/dashboard/revenue?interval={{name}}"{{#current}} class="current"{{/current}}>by {{name}}</a>{{/intervals}}</p>
        <div class="charts">
        {{#charts}}<figure id="chart-{{id}}"><figcaption>{{title}}</figcaption>{{{svg}}}
        <p class="links">{{#csv}}<a class="csv" href="{{href}}">{{name}} CSV</a>{{/csv}}</p></figure>{{/charts}}
        </div>
        <h2>Cohorts: subscribers still running at each month's end, by month of first purchase<a class="csv" href="{{cohortsCSV}}">CSV</a></h2>
        <p class="note">M0 is the month of first purchase itself, M1 the month after, and so on; a month shows once it has ended.</p>
        {{#hasCohorts}}<table id="cohorts"><thead><tr><th>First month</th><th class="n">Subscribers</th>{{#cohortMonths}}<th class="n">{{name}}</th>{{/cohortMonths}}</tr></thead><tbody>
        {{#cohorts}}<tr><td>{{month}}</td><td class="n">{{size}}</td>{{#cells}}<td class="n">{{#known}}{{count}} <span class="pct">{{percent}}</span>{{/known}}</td>{{/cells}}</tr>{{/cohorts}}
        </tbody></table>{{/hasCohorts}}
        {{^hasCohorts}}<p class="empty" id="cohorts">No subscription yet.</p>{{/hasCohorts}}
        {{> foot}}
        """

    static let account = """
        {{> head}}
        <h1>Account <span class="id" id="account">{{accountId}}</span></h1>
        <h2>Owns now</h2>
        {{#hasOwned}}<table id="owned"><thead><tr><th>Entitlement</th><th>Product</th><th>Transaction</th><th>State</th><th>Expires</th></tr></thead><tbody>
        {{#entitlements}}<tr><td>{{name}}</td><td>{{productId}}</td><td class="id">{{transactionId}}</td><td>{{state}}</td><td>{{expires}}</td></tr>{{/entitlements}}
        {{#balances}}<tr><td>{{currency}}</td><td colspan="4">balance {{amount}}</td></tr>{{/balances}}
        </tbody></table>{{/hasOwned}}
        {{^hasOwned}}<p class="empty">Nothing.</p>{{/hasOwned}}
        <h2>Timeline</h2>
        <table id="timeline"><thead><tr><th>When (UTC)</th><th>What</th><th>Subject</th><th>Detail</th></tr></thead><tbody>
        {{#timeline}}<tr class="{{kind}}"><td>{{at}}</td><td>{{kind}}</td><td class="id"><a href="/dashboard/search?q={{subjectQuery}}">{{subject}}</a></td><td>{{detail}}</td></tr>{{/timeline}}
        </tbody></table>
        {{> foot}}
        """

    static let orders = """
        {{> head}}
        <h1>Orders: {{stateTitle}}</h1>
        <p class="tabs">{{#states}}<a href="/dashboard/orders?state={{name}}"{{#current}} class="current"{{/current}}>{{title}}</a>{{/states}}</p>
        <form method="post" action="/dashboard/reconcile" class="inline"><input type="hidden" name="csrf" value="{{frame.csrf}}">
        <button id="reconcile">Reconcile with Apple now</button></form>
        {{#hasOrders}}<table id="orders"><thead><tr><th>Created (UTC)</th><th>Order</th><th>Account</th><th>Product</th><th>State</th><th>Settle</th></tr></thead><tbody>
        {{#orders}}<tr id="order-{{orderId}}"><td>{{createdAt}}</td><td class="id">{{orderId}}</td>
        <td><a href="/dashboard/account?id={{accountPath}}">{{accountId}}</a></td><td>{{productId}}</td><td>{{state}}</td>
        <td>{{#open}}<form method="post" action="/dashboard/orders/{{orderId}}/settle" class="settle"><input type="hidden" name="csrf" value="{{frame.csrf}}">
        <input name="transactionId" placeholder="transaction id (grants it)" aria-label="transaction id">
        <input name="note" placeholder="note (required)" aria-label="note" required><button>Settle</button></form>{{/open}}
        {{^open}}{{transactionId}}{{/open}}</td></tr>{{/orders}}
        </tbody></table>{{/hasOrders}}
        {{^hasOrders}}<p class="empty">No order.</p>{{/hasOrders}}
        {{> foot}}
        """

    static let notifications = """
        {{> head}}
        <h1>Notifications</h1>
        <table id="notifications"><thead><tr><th>Signed (UTC)</th><th>Type</th><th>Transaction</th><th>Payload</th></tr></thead><tbody>
        {{#notifications}}<tr><td>{{signedDate}}</td><td>{{type}}</td>
        <td class="id">{{#transactionId}}<a href="/dashboard/search?q={{transactionQuery}}">{{transactionId}}</a>{{/transactionId}}</td>
        <td><details><summary>{{uuid}}</summary><pre>{{payload}}</pre></details></td></tr>{{/notifications}}
        </tbody></table>
        {{> foot}}
        """

    static let webhooks = """
        {{> head}}
        <h1>Webhook events{{#stateTitle}}: {{stateTitle}}{{/stateTitle}}</h1>
        <p>{{configured}}</p>
        <p class="tabs"><a href="/dashboard/webhooks">all</a><a href="/dashboard/webhooks?state=pending">pending</a>
        <a href="/dashboard/webhooks?state=failed">failed</a><a href="/dashboard/webhooks?state=delivered">delivered</a></p>
        <table id="webhooks"><thead><tr><th>Created (UTC)</th><th>Event</th><th>Account</th><th>State</th><th class="n">Attempts</th><th>Last error</th><th></th></tr></thead><tbody>
        {{#events}}<tr><td>{{createdAt}}</td><td class="id">{{eventId}}</td><td>{{accountId}}</td><td>{{state}}</td><td class="n">{{attempts}}</td><td>{{lastError}}</td>
        <td><form method="post" action="/dashboard/webhooks/{{eventPath}}/replay" class="inline"><input type="hidden" name="csrf" value="{{frame.csrf}}">
        <button>Replay</button></form></td></tr>{{/events}}
        </tbody></table>
        {{> foot}}
        """

    static let search = """
        {{> head}}
        <h1>Search</h1>
        {{#hasMatches}}<table id="matches"><thead><tr><th>Matched</th><th>Value</th><th>Account</th></tr></thead><tbody>
        {{#matches}}<tr><td>{{via}}</td><td class="id">{{subject}}</td>
        <td>{{#accountId}}<a href="/dashboard/account?id={{accountPath}}">{{accountId}}</a>{{/accountId}}{{^accountId}}no account yet{{/accountId}}</td></tr>{{/matches}}
        </tbody></table>{{/hasMatches}}
        {{^hasMatches}}<p class="empty">Nothing in the ledger is named {{query}}.</p>{{/hasMatches}}
        {{#hasUnbound}}<h2>Transactions no account holds</h2><table><thead><tr><th>Transaction</th><th>Original</th><th>Product</th><th>Purchased (UTC)</th></tr></thead><tbody>
        {{#unbound}}<tr><td class="id">{{transactionId}}</td><td class="id">{{originalTransactionId}}</td><td>{{productId}}</td><td>{{purchaseDate}}</td></tr>{{/unbound}}
        </tbody></table>{{/hasUnbound}}
        {{> foot}}
        """

    static let message = """
        {{> head}}
        <h1>{{frame.title}}</h1>
        {{> foot}}
        """

    static let style = """
        body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
        header{display:flex;gap:1.2em;align-items:center;padding:.6em 1.2em;background:#1d2330;color:#fff;flex-wrap:wrap}
        header a{color:#fff;text-decoration:none}.brand{font-weight:700;font-size:1.15em}nav a{margin-right:1em}
        .search{flex:1;display:flex;gap:.4em}.search input{flex:1;min-width:16em}
        main{padding:1em 1.6em;max-width:1200px}h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em}
        table{border-collapse:collapse;width:100%;background:#fff}th,td{padding:.35em .6em;border-bottom:1px solid #e3e6ea;text-align:left;vertical-align:top}
        td.n,th.n{text-align:right}.id{font-family:ui-monospace,monospace;font-size:.92em}
        .cards{display:flex;gap:1em;flex-wrap:wrap}.card{background:#fff;border:1px solid #e3e6ea;border-radius:6px;padding:.8em 1em;color:inherit;text-decoration:none;min-width:11em}
        .card b{display:block;font-size:1.6em}.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(360px,1fr));gap:1em}
        figure{margin:0;background:#fff;border:1px solid #e3e6ea;border-radius:6px;padding:.6em}figcaption{font-weight:600}
        .flash{background:#e5f5e8;border:1px solid #9fd3aa;padding:.5em .8em}.problem{background:#fbe9e9;border:1px solid #e2a3a3;padding:.5em .8em}
        .empty{color:#667}.tabs a{margin-right:1em}.tabs a.current{font-weight:700}form.inline{display:inline}
        form.settle{display:flex;gap:.3em}button.quiet{background:none;border:1px solid #778;color:#fff;border-radius:4px}
        pre{white-space:pre-wrap;word-break:break-all;max-width:60em}.login{display:flex;gap:.6em;align-items:end}
        a.csv{font-size:.8rem;font-weight:400;margin-left:.8em}.links a.csv{margin:0 .8em 0 0}.links{margin:.3em 0 0}
        .note{color:#667;font-weight:400;font-size:.85rem;margin-left:.6em}.pct{color:#667;font-size:.85em}
        .approximate{background:#fff8e6;border:1px solid #e8cf8f;padding:.5em .8em}
        """
}
