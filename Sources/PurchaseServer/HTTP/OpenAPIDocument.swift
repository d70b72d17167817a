// Written by scripts/openapi.py from the same source as docs/openapi.json: edit that script, not this file.
enum OpenAPIDocument {
    static let json = #"""
{
 "components": {
  "responses": {
   "RateLimited": {
    "content": {
     "application/json": {
      "schema": {
       "$ref": "#/components/schemas/Error"
      }
     }
    },
    "description": "`rate_limited` (class `retry`): the request would make the server ask Apple more often than its limits allow (per account, overall, or proofs held per account while Apple is away); nothing was done, come back after `Retry-After` seconds",
    "headers": {
     "Retry-After": {
      "description": "seconds to wait",
      "schema": {
       "minimum": 1,
       "type": "integer"
      }
     }
    }
   },
   "Refusal": {
    "content": {
     "application/json": {
      "schema": {
       "$ref": "#/components/schemas/Error"
      }
     }
    },
    "description": "A refusal: `error.code` is stable"
   }
  },
  "schemas": {
   "Entitlement": {
    "additionalProperties": true,
    "properties": {
     "appAccountToken": {
      "type": "string"
     },
     "environment": {
      "type": "string"
     },
     "expiresAt": {
      "description": "milliseconds since 1970",
      "type": "integer"
     },
     "name": {
      "type": "string"
     },
     "originalTransactionId": {
      "type": "string"
     },
     "productId": {
      "type": "string"
     },
     "state": {
      "enum": [
       "active",
       "gracePeriod"
      ]
     },
     "transactionId": {
      "type": "string"
     }
    },
    "required": [
     "name",
     "productId",
     "transactionId",
     "state",
     "environment"
    ],
    "type": "object"
   },
   "Entitlements": {
    "additionalProperties": true,
    "properties": {
     "accountId": {
      "type": "string"
     },
     "balances": {
      "additionalProperties": {
       "type": "integer"
      },
      "type": "object"
     },
     "entitlements": {
      "items": {
       "$ref": "#/components/schemas/Entitlement"
      },
      "type": "array"
     }
    },
    "required": [
     "accountId",
     "entitlements",
     "balances"
    ],
    "type": "object"
   },
   "Error": {
    "additionalProperties": true,
    "properties": {
     "error": {
      "additionalProperties": true,
      "properties": {
       "class": {
        "enum": [
         "final",
         "operator",
         "retry"
        ]
       },
       "code": {
        "type": "string"
       },
       "message": {
        "type": "string"
       }
      },
      "required": [
       "message"
      ],
      "type": "object"
     }
    },
    "required": [
     "error"
    ],
    "type": "object"
   },
   "Order": {
    "additionalProperties": true,
    "properties": {
     "accountId": {
      "type": "string"
     },
     "appAccountToken": {
      "type": "string"
     },
     "createdAt": {
      "description": "milliseconds since 1970",
      "type": "integer"
     },
     "expiresAt": {
      "description": "milliseconds since 1970",
      "type": "integer"
     },
     "orderId": {
      "type": "string"
     },
     "productId": {
      "type": "string"
     },
     "state": {
      "type": "string"
     },
     "transactionId": {
      "type": "string"
     }
    },
    "required": [
     "orderId",
     "productId"
    ],
    "type": "object"
   },
   "WebhookEvent": {
    "additionalProperties": true,
    "properties": {
     "accountId": {
      "type": "string"
     },
     "attempts": {
      "type": "integer"
     },
     "body": {
      "type": "string"
     },
     "createdAt": {
      "description": "milliseconds since 1970",
      "type": "integer"
     },
     "deliveredAt": {
      "description": "milliseconds since 1970",
      "type": "integer"
     },
     "eventId": {
      "type": "string"
     },
     "lastError": {
      "type": "string"
     },
     "nextAttemptAt": {
      "description": "when the event falls due for its next attempt, milliseconds since 1970 by the senders' wall clock (kept as it was once delivered)",
      "type": "integer"
     },
     "state": {
      "enum": [
       "pending",
       "delivered",
       "failed"
      ]
     },
     "type": {
      "type": "string"
     }
    },
    "required": [
     "eventId",
     "type",
     "body",
     "state",
     "attempts"
    ],
    "type": "object"
   }
  },
  "securitySchemes": {
   "accountToken": {
    "bearerFormat": "JWT",
    "scheme": "bearer",
    "type": "http"
   },
   "adminKey": {
    "scheme": "bearer",
    "type": "http"
   },
   "metricsKey": {
    "scheme": "bearer",
    "type": "http"
   }
  }
 },
 "info": {
  "description": "The app API (a bearer JWT from the app's own sign-in), Apple's endpoints (signed by Apple), and the admin API (the admin key as a bearer token). Errors answer `{\"error\": {\"code\", \"message\", \"class\"}}`; dates are milliseconds since 1970.",
  "title": "IAPKit purchase server",
  "version": "1"
 },
 "openapi": "3.1.0",
 "paths": {
  "/admin/accounts/{id}/timeline": {
   "get": {
    "parameters": [
     {
      "in": "path",
      "name": "id",
      "required": true,
      "schema": {
       "maxLength": 200,
       "minLength": 1,
       "type": "string"
      }
     },
     {
      "description": "",
      "in": "query",
      "name": "limit",
      "required": false,
      "schema": {
       "maximum": 10000,
       "minimum": 1,
       "type": "integer"
      }
     }
    ],
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "accountId": {
           "type": "string"
          },
          "entitlements": {
           "$ref": "#/components/schemas/Entitlements"
          },
          "timeline": {
           "type": "array"
          }
         },
         "required": [
          "accountId",
          "timeline",
          "entitlements"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "adminKey": []
     }
    ],
    "summary": "An account's history and what it owns",
    "tags": [
     "admin"
    ]
   }
  },
  "/admin/audit": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "entries": {
           "type": "array"
          }
         },
         "required": [
          "entries"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "adminKey": []
     }
    ],
    "summary": "The audit log",
    "tags": [
     "admin"
    ]
   }
  },
  "/admin/conflicts": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "conflicts": {
           "type": "array"
          }
         },
         "required": [
          "conflicts"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "adminKey": []
     }
    ],
    "summary": "Transactions another account tried to claim",
    "tags": [
     "admin"
    ]
   }
  },
  "/admin/consistency": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "consistent": {
           "type": "boolean"
          },
          "inconsistencies": {
           "type": "array"
          }
         },
         "required": [
          "consistent",
          "inconsistencies"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "adminKey": []
     }
    ],
    "summary": "The ledger's own checks",
    "tags": [
     "admin"
    ]
   }
  },
  "/admin/notifications": {
   "get": {
    "parameters": [
     {
      "description": "",
      "in": "query",
      "name": "originalTransactionId",
      "required": false,
      "schema": {
       "type": "string"
      }
     },
     {
      "description": "",
      "in": "query",
      "name": "payload",
      "required": false,
      "schema": {
       "type": "boolean"
      }
     },
     {
      "description": "",
      "in": "query",
      "name": "limit",
      "required": false,
      "schema": {
       "maximum": 10000,
       "minimum": 1,
       "type": "integer"
      }
     }
    ],
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "notifications": {
           "type": "array"
          }
         },
         "required": [
          "notifications"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "adminKey": []
     }
    ],
    "summary": "The notifications log, newest first",
    "tags": [
     "admin"
    ]
   }
  },
  "/admin/orders": {
   "get": {
    "parameters": [
     {
      "description": "",
      "in": "query",
      "name": "state",
      "required": false,
      "schema": {
       "enum": [
        "paid-unfulfilled",
        "stuck",
        "created",
        "granted",
        "settled"
       ]
      }
     }
    ],
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "orders": {
           "items": {
            "$ref": "#/components/schemas/Order"
           },
           "type": "array"
          }
         },
         "required": [
          "orders"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "adminKey": []
     }
    ],
    "summary": "Orders by state",
    "tags": [
     "admin"
    ]
   }
  },
  "/admin/orders/{id}/settle": {
   "post": {
    "parameters": [
     {
      "in": "path",
      "name": "id",
      "required": true,
      "schema": {
       "maxLength": 200,
       "minLength": 1,
       "type": "string"
      }
     }
    ],
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "additionalProperties": true,
        "properties": {
         "note": {
          "type": "string"
         },
         "signedTransaction": {
          "type": "string"
         },
         "transactionId": {
          "type": "string"
         }
        },
        "required": [
         "note"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Order"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "adminKey": []
     }
    ],
    "summary": "Settle an order: grant a transaction to it, or close it with a note",
    "tags": [
     "admin"
    ]
   }
  },
  "/admin/proofs": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "proofs": {
           "type": "array"
          }
         },
         "required": [
          "proofs"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "adminKey": []
     }
    ],
    "summary": "Proofs held while Apple could not be asked",
    "tags": [
     "admin"
    ]
   }
  },
  "/admin/reconcile": {
   "post": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "adminKey": []
     }
    ],
    "summary": "Run the reconciliation job now",
    "tags": [
     "admin"
    ]
   }
  },
  "/admin/subscriptions/{originalTransactionId}": {
   "get": {
    "parameters": [
     {
      "in": "path",
      "name": "originalTransactionId",
      "required": true,
      "schema": {
       "maxLength": 200,
       "minLength": 1,
       "type": "string"
      }
     }
    ],
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "adminKey": []
     }
    ],
    "summary": "A subscription series",
    "tags": [
     "admin"
    ]
   }
  },
  "/admin/transactions": {
   "get": {
    "parameters": [
     {
      "description": "",
      "in": "query",
      "name": "unbound",
      "required": false,
      "schema": {
       "type": "boolean"
      }
     },
     {
      "description": "",
      "in": "query",
      "name": "limit",
      "required": false,
      "schema": {
       "maximum": 10000,
       "minimum": 1,
       "type": "integer"
      }
     }
    ],
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "transactions": {
           "type": "array"
          }
         },
         "required": [
          "transactions"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "adminKey": []
     }
    ],
    "summary": "Transactions, newest first",
    "tags": [
     "admin"
    ]
   }
  },
  "/admin/transactions/{id}": {
   "get": {
    "parameters": [
     {
      "in": "path",
      "name": "id",
      "required": true,
      "schema": {
       "maxLength": 200,
       "minLength": 1,
       "type": "string"
      }
     }
    ],
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "adminKey": []
     }
    ],
    "summary": "One transaction",
    "tags": [
     "admin"
    ]
   }
  },
  "/admin/webhooks": {
   "get": {
    "parameters": [
     {
      "description": "",
      "in": "query",
      "name": "state",
      "required": false,
      "schema": {
       "enum": [
        "pending",
        "delivered",
        "failed"
       ]
      }
     },
     {
      "description": "",
      "in": "query",
      "name": "limit",
      "required": false,
      "schema": {
       "maximum": 10000,
       "minimum": 1,
       "type": "integer"
      }
     }
    ],
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "configured": {
           "type": "boolean"
          },
          "events": {
           "items": {
            "$ref": "#/components/schemas/WebhookEvent"
           },
           "type": "array"
          }
         },
         "required": [
          "configured",
          "events"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "adminKey": []
     }
    ],
    "summary": "The webhooks' outbox",
    "tags": [
     "admin"
    ]
   }
  },
  "/admin/webhooks/test": {
   "post": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "queued": {
           "type": "string"
          }
         },
         "required": [
          "queued"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "adminKey": []
     }
    ],
    "summary": "Queue a TEST event (400 webhooks_not_configured without a receiver URL)",
    "tags": [
     "admin"
    ]
   }
  },
  "/admin/webhooks/{id}/replay": {
   "post": {
    "parameters": [
     {
      "in": "path",
      "name": "id",
      "required": true,
      "schema": {
       "maxLength": 200,
       "minLength": 1,
       "type": "string"
      }
     }
    ],
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "replayed": {
           "type": "string"
          }
         },
         "required": [
          "replayed"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "adminKey": []
     }
    ],
    "summary": "Send an event again from its first attempt",
    "tags": [
     "admin"
    ]
   }
  },
  "/health": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "status": {
           "type": "string"
          },
          "store": {
           "type": "string"
          }
         },
         "required": [
          "status",
          "store"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [],
    "summary": "Liveness: the ledger answered a read begun after the request arrived (concurrent checks share one)",
    "tags": [
     "ops"
    ]
   }
  },
  "/metrics": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "text/plain": {
        "schema": {
         "type": "string"
        }
       }
      },
      "description": "text exposition"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "metricsKey": []
     },
     {
      "adminKey": []
     }
    ],
    "summary": "Prometheus metrics: the metrics key or the admin key as a bearer token, unless the server sets publicMetrics",
    "tags": [
     "ops"
    ]
   }
  },
  "/openapi.json": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [],
    "summary": "This document",
    "tags": [
     "ops"
    ]
   }
  },
  "/v1/consumables/{currency}/spend": {
   "post": {
    "parameters": [
     {
      "in": "path",
      "name": "currency",
      "required": true,
      "schema": {
       "maxLength": 200,
       "minLength": 1,
       "type": "string"
      }
     }
    ],
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "additionalProperties": true,
        "properties": {
         "amount": {
          "type": "integer"
         },
         "idempotencyKey": {
          "type": "string"
         }
        },
        "required": [
         "amount"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "balance": {
           "type": "integer"
          },
          "currency": {
           "type": "string"
          }
         },
         "required": [
          "currency",
          "balance"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "accountToken": []
     }
    ],
    "summary": "Spend a balance once per idempotency key",
    "tags": [
     "app"
    ]
   }
  },
  "/v1/consumption-consent": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "changedAt": {
           "description": "milliseconds since 1970",
           "type": "integer"
          },
          "consented": {
           "type": "boolean"
          },
          "source": {
           "type": "string"
          }
         },
         "required": [
          "consented"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "accountToken": []
     }
    ],
    "summary": "Whether the customer agreed to send consumption data with refund requests",
    "tags": [
     "app"
    ]
   },
   "put": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "additionalProperties": true,
        "properties": {
         "consented": {
          "type": "boolean"
         }
        },
        "required": [
         "consented"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "changedAt": {
           "description": "milliseconds since 1970",
           "type": "integer"
          },
          "consented": {
           "type": "boolean"
          },
          "source": {
           "type": "string"
          }
         },
         "required": [
          "consented"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "accountToken": []
     }
    ],
    "summary": "Set the customer's consent",
    "tags": [
     "app"
    ]
   }
  },
  "/v1/entitlements": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "accountId": {
           "type": "string"
          },
          "balances": {
           "additionalProperties": {
            "type": "integer"
           },
           "type": "object"
          },
          "entitlements": {
           "items": {
            "$ref": "#/components/schemas/Entitlement"
           },
           "type": "array"
          },
          "signedEntitlements": {
           "type": "string"
          }
         },
         "required": [
          "accountId",
          "entitlements",
          "balances"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "accountToken": []
     }
    ],
    "summary": "What the account owns now",
    "tags": [
     "app"
    ]
   }
  },
  "/v1/keys/entitlements": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/x-pem-file": {
        "schema": {
         "type": "string"
        }
       }
      },
      "description": "PEM"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [],
    "summary": "The key entitlement answers are signed with",
    "tags": [
     "app"
    ]
   }
  },
  "/v1/notifications/appstore": {
   "post": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "additionalProperties": true,
        "properties": {
         "signedPayload": {
          "type": "string"
         }
        },
        "required": [
         "signedPayload"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "result": {
           "enum": [
            "applied",
            "duplicate"
           ]
          }
         },
         "required": [
          "result"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [],
    "summary": "App Store Server Notifications V2 (Apple's signature is the proof)",
    "tags": [
     "apple"
    ]
   }
  },
  "/v1/offers/sign": {
   "post": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "additionalProperties": true,
        "properties": {
         "appAccountToken": {
          "type": "string"
         },
         "appTransaction": {
          "type": "string"
         },
         "format": {
          "enum": [
           "jws",
           "legacy"
          ]
         },
         "kind": {
          "enum": [
           "promotionalOffer",
           "introductoryOfferEligibility"
          ]
         },
         "offerIdentifier": {
          "type": "string"
         },
         "productId": {
          "type": "string"
         }
        },
        "required": [
         "kind",
         "productId"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "allowIntroductoryOffer": {
           "type": "boolean"
          },
          "kind": {
           "type": "string"
          },
          "legacySignature": {
           "type": "object"
          },
          "offerIdentifier": {
           "type": "string"
          },
          "productId": {
           "type": "string"
          },
          "signature": {
           "type": "string"
          }
         },
         "required": [
          "kind",
          "productId"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "accountToken": []
     }
    ],
    "summary": "Signatures StoreKit needs from the app's server (promotional offers, introductory-offer eligibility)",
    "tags": [
     "app"
    ]
   }
  },
  "/v1/orders": {
   "post": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "additionalProperties": true,
        "properties": {
         "expectedAccountId": {
          "description": "the account the app orders for; a bearer token of another account is refused (409 account_mismatch) and no order is made",
          "type": "string"
         },
         "productId": {
          "maxLength": 200,
          "minLength": 1,
          "type": "string"
         }
        },
        "required": [
         "productId"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "201": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "appAccountToken": {
           "type": "string"
          },
          "expiresAt": {
           "description": "milliseconds since 1970",
           "type": "integer"
          },
          "orderId": {
           "type": "string"
          },
          "productId": {
           "type": "string"
          }
         },
         "required": [
          "orderId",
          "productId",
          "appAccountToken",
          "expiresAt"
         ],
         "type": "object"
        }
       }
      },
      "description": "Created"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "accountToken": []
     }
    ],
    "summary": "Create an order for a product; pay with its appAccountToken",
    "tags": [
     "app"
    ]
   }
  },
  "/v1/purchases": {
   "post": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "additionalProperties": true,
        "properties": {
         "appTransaction": {
          "type": "string"
         },
         "deviceIntegrity": {
          "additionalProperties": true,
          "properties": {
           "applicable": {
            "type": "boolean"
           },
           "signals": {
            "items": {
             "type": "string"
            },
            "type": "array"
           }
          },
          "type": "object"
         },
         "expectedAccountId": {
          "type": "string"
         },
         "orderId": {
          "type": "string"
         },
         "receipt": {
          "type": "string"
         },
         "signedTransaction": {
          "type": "string"
         },
         "transactionId": {
          "type": "string"
         }
        },
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "entitlements": {
           "$ref": "#/components/schemas/Entitlements"
          },
          "orderId": {
           "type": "string"
          },
          "orderRefusal": {
           "additionalProperties": true,
           "description": "the transaction was granted (outcome) by its appAccountToken, but not as the order the request named: a payment for another product (order_product_mismatch); that order stays open. Also on each item of transactions",
           "properties": {
            "code": {
             "type": "string"
            },
            "message": {
             "type": "string"
            },
            "orderId": {
             "type": "string"
            }
           },
           "required": [
            "orderId",
            "code",
            "message"
           ],
           "type": "object"
          },
          "outcome": {
           "type": "string"
          },
          "refused": {
           "description": "lines refused while others were granted: finish only the final ones",
           "items": {
            "additionalProperties": true,
            "properties": {
             "class": {
              "enum": [
               "final",
               "operator",
               "retry"
              ]
             },
             "code": {
              "type": "string"
             },
             "message": {
              "type": "string"
             },
             "transactionId": {
              "type": "string"
             }
            },
            "required": [
             "transactionId",
             "code",
             "message",
             "class"
            ],
            "type": "object"
           },
           "type": "array"
          },
          "signedEntitlements": {
           "type": "string"
          },
          "transactionId": {
           "type": "string"
          },
          "transactions": {
           "type": "array"
          }
         },
         "required": [
          "transactions",
          "refused",
          "entitlements"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "202": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "proofId": {
           "type": "string"
          },
          "retryAt": {
           "description": "milliseconds since 1970",
           "type": "integer"
          },
          "status": {
           "type": "string"
          }
         },
         "required": [
          "status",
          "proofId"
         ],
         "type": "object"
        }
       }
      },
      "description": "Apple could not be asked now: the proof is kept and granted later"
     },
     "429": {
      "$ref": "#/components/responses/RateLimited"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "accountToken": []
     }
    ],
    "summary": "Submit what the App Store signed: verified, bound to its order and account, granted once",
    "tags": [
     "app"
    ]
   }
  },
  "/v1/restore": {
   "post": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "additionalProperties": true,
        "properties": {
         "receipt": {
          "type": [
           "string",
           "null"
          ]
         },
         "signedTransactions": {
          "items": {
           "type": "string"
          },
          "type": "array"
         }
        },
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "entitlements": {
           "$ref": "#/components/schemas/Entitlements"
          },
          "refused": {
           "items": {
            "type": "string"
           },
           "type": "array"
          },
          "restored": {
           "type": "integer"
          },
          "signedEntitlements": {
           "type": "string"
          }
         },
         "required": [
          "restored",
          "refused",
          "entitlements"
         ],
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "429": {
      "$ref": "#/components/responses/RateLimited"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [
     {
      "accountToken": []
     }
    ],
    "summary": "Bind what the store restored; answer what the account owns",
    "tags": [
     "app"
    ]
   }
  },
  "/v1/retention/appstore": {
   "post": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "additionalProperties": true,
        "properties": {
         "signedPayload": {
          "type": "string"
         }
        },
        "required": [
         "signedPayload"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "additionalProperties": true,
         "properties": {
          "alternateProduct": {
           "type": "object"
          },
          "message": {
           "type": "object"
          },
          "promotionalOffer": {
           "type": "object"
          }
         },
         "type": "object"
        }
       }
      },
      "description": "OK"
     },
     "default": {
      "$ref": "#/components/responses/Refusal"
     }
    },
    "security": [],
    "summary": "Retention Messaging's Get Retention Message (Apple's signature is the proof)",
    "tags": [
     "apple"
    ]
   }
  }
 }
}
"""#
}
