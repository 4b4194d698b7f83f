//! What every full page has around its content (title, navigation, viewer, breadcrumbs): used by
//! the pages and by the error page alike.

use super::view::Viewer;

/// What every full page needs around its content.
#[derive(Debug, Clone)]
pub struct Chrome {
    pub title: String,
    /// The highlighted navigation entry: `overview`, `operations`, `audit`, `instances` or empty.
    pub nav: &'static str,
    pub viewer: Option<Viewer>,
    pub asset_v: &'static str,
    pub version: &'static str,
    /// Breadcrumbs before the page title: (label, href).
    pub crumbs: Vec<(String, String)>,
}

impl Chrome {
    pub fn new(title: &str, nav: &'static str, viewer: Option<Viewer>) -> Chrome {
        Chrome {
            title: title.to_string(),
            nav,
            viewer,
            asset_v: super::assets::version(),
            version: env!("CARGO_PKG_VERSION"),
            crumbs: Vec::new(),
        }
    }

    pub(super) fn crumbs(mut self, crumbs: Vec<(String, String)>) -> Chrome {
        self.crumbs = crumbs;
        self
    }
}
