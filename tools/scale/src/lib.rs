//! The scale simulation's parts: the production profile, the settings
//! read from `template.yaml`, the services' documented limits under virtual time, and the cost
//! of a simulated month. See tools/scale/README.md.

pub mod cost;
pub mod day;
pub mod happenings;
pub mod measure;
pub mod memory;
pub mod observe;
pub mod plan;
pub mod platform;
pub mod population;
pub mod ports;
pub mod profile;
pub mod report;
pub mod run;
pub mod services;
pub mod settings;
pub mod show;
pub mod world;
