package controlplane

// webhookMigration holds the webhook and registry tables (issue 7).
var webhookMigration = migration{version: 4, name: "webhooks: endpoints, outbox, deliveries; registry queue"}
