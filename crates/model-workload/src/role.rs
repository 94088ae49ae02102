//! [`Role`]: a projection's place in a decoder layer, as presets and configs name them.

/// A projection's place in a decoder layer, in the order a token runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The query projection: `heads · head_dim × hidden`.
    Q,
    /// The key projection: `kv_heads · head_dim × hidden`.
    K,
    /// The value projection: `kv_heads · head_dim × hidden`.
    V,
    /// The attention output: `hidden × heads · head_dim`.
    O,
    /// The feed-forward gate: `intermediate × hidden`.
    Gate,
    /// The feed-forward up projection: `intermediate × hidden`.
    Up,
    /// The feed-forward down projection: `hidden × intermediate`.
    Down,
}

impl Role {
    /// Every role, in the order a token runs them.
    pub const ALL: [Role; 7] = [
        Role::Q,
        Role::K,
        Role::V,
        Role::O,
        Role::Gate,
        Role::Up,
        Role::Down,
    ];

    /// Its name as a [`Projection::name`](crate::Projection::name): `q`, `k`, `v`, `o`, `gate`, `up`, `down`.
    pub const fn name(self) -> &'static str {
        match self {
            Role::Q => "q",
            Role::K => "k",
            Role::V => "v",
            Role::O => "o",
            Role::Gate => "gate",
            Role::Up => "up",
            Role::Down => "down",
        }
    }
}
