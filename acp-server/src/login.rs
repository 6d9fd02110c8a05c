//! `dsh login` and `dsh logout`: the terminal login a registry install
//! needs (it has no place for an API key in the environment). The key is
//! read without echo from the terminal, or a line from stdin when stdin is
//! not one, and stored in `$DSH_HOME/.credentials.yaml`
//! ([`crate::credentials`]); it is never printed.

use std::io::{BufRead, IsTerminal, Write};

use crate::config::Config;

/// `dsh login`: the process's exit status.
pub fn login(config: &Config) -> u8 {
    let name = &config.model.key.name;
    let mut stderr = std::io::stderr();
    if name.is_empty() {
        let _ = writeln!(
            stderr,
            "dsh login: config.toml declares the endpoint keyless ([provider] api_key_env = \"\"); there is no key to store"
        );
        return 2;
    }
    let key = if std::io::stdin().is_terminal() {
        let _ = writeln!(
            stderr,
            "dsh stores the {} in {} (readable only by you).",
            config.model.key_name(),
            crate::credentials::credentials_file(&config.home).display()
        );
        rpassword::prompt_password(format!("{}: ", config.model.key_name()))
    } else {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).map(|_| line)
    };
    let key = match key {
        Ok(key) => key.trim().to_owned(),
        Err(err) => {
            let _ = writeln!(stderr, "dsh login: cannot read the key: {err}");
            return 1;
        }
    };
    if key.is_empty() {
        let _ = writeln!(stderr, "dsh login: no key given; nothing stored");
        return 2;
    }
    match crate::credentials::store(&config.home, name, &key) {
        Ok(path) => {
            let _ = writeln!(
                stderr,
                "Logged in: the {} is stored in {}. {name} in the environment still takes precedence.",
                config.model.key_name(),
                path.display()
            );
            0
        }
        Err(err) => {
            let _ = writeln!(stderr, "dsh login: {err}");
            1
        }
    }
}

/// `dsh logout`: the process's exit status.
pub fn logout(config: &Config) -> u8 {
    let mut stderr = std::io::stderr();
    if config.model.key.name.is_empty() {
        let _ = writeln!(
            stderr,
            "No stored key: the endpoint is keyless; nothing to remove."
        );
        return 0;
    }
    match crate::credentials::remove(&config.home, &config.model.key.name) {
        Ok(true) => {
            let _ = writeln!(
                stderr,
                "Logged out: the stored {} is removed.",
                config.model.key_name()
            );
            0
        }
        Ok(false) => {
            let _ = writeln!(
                stderr,
                "No stored {}; nothing to remove.",
                config.model.key_name()
            );
            0
        }
        Err(err) => {
            let _ = writeln!(stderr, "dsh logout: {err}");
            1
        }
    }
}
